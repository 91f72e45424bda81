import { z } from 'zod';
import type { RouteSpec } from './routes.js';
import { queryInt } from './values.js';

// KV routes (PROTOCOL §6). The KV is never called state: stream state is §7.
// The transaction's `kv` array (§5.7) is validated by admin.ts with the same
// value rules.

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** `[A-Za-z0-9._:-]{1,128}`. */
export const kvNamespace = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'must match [A-Za-z0-9._:-]{1,128}');

/** 1–512 chars, no control characters (U+0000–U+001F, U+007F). */
export const kvKey = z
  .string()
  .min(1)
  .max(512)
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), 'must not contain control characters');

/** Time to live, whole seconds, 1 s .. 1 year. */
export const kvTtlSeconds = z.number().int().min(1).max(31536000);

/** A version as the client read it; `0` means "absent" (create-only). */
export const kvVersion = z.number().int().min(0).max(MAX_SAFE);

const kvInt = z.number().int().min(-MAX_SAFE).max(MAX_SAFE);

export const kvKeyParams = z.object({ namespace: kvNamespace, key: kvKey });
export const kvNamespaceParams = z.object({ namespace: kvNamespace });

export const kvPutBody = z.object({
  value: z.unknown().refine((v) => v !== undefined, 'is required'),
  ttlSeconds: kvTtlSeconds.optional(),
  expectedVersion: kvVersion.optional(),
});
export type KvPutBody = z.infer<typeof kvPutBody>;

export const kvDeleteQuery = z.object({ expectedVersion: queryInt(0, MAX_SAFE).optional() });

export const kvIncrBody = z.object({
  by: kvInt.default(1),
  max: kvInt.optional(),
  ttlSeconds: kvTtlSeconds.optional(),
});
export type KvIncrBody = z.infer<typeof kvIncrBody>;

export const kvListQuery = z.object({
  prefix: z.string().max(512).optional(),
  after: z.string().max(512).optional(),
  limit: queryInt(1, 1000).default(100),
});
export type KvListQuery = z.infer<typeof kvListQuery>;

export const kvEntry = z.object({
  namespace: z.string(),
  key: z.string(),
  value: z.unknown(),
  version: z.number().int(),
  expiresAt: z.string().nullable(),
  updatedAt: z.string(),
});
export type KvEntry = z.infer<typeof kvEntry>;

export const kvPutResponse = kvEntry.extend({ created: z.boolean() });
export type KvPutResult = z.infer<typeof kvPutResponse>;

export const kvDeleteResponse = z.object({ deleted: z.boolean() });

export const kvIncrResponse = z.object({
  value: z.number().int(),
  applied: z.boolean(),
  /** null when a denied incr met an absent key. */
  version: z.number().int().nullable(),
  expiresAt: z.string().nullable(),
});
export type KvIncrResult = z.infer<typeof kvIncrResponse>;

/** Namespaces in bytewise order; `after` = exclusive cursor (the previous page's `nextAfter`). */
export const kvNamespacesQuery = z.object({
  after: z.string().max(128).optional(),
  limit: queryInt(1, 1000).default(100),
});
export type KvNamespacesQuery = z.infer<typeof kvNamespacesQuery>;
/** Namespaces holding rows (a namespace whose keys all expired shows until the expiry purge). */
export const kvNamespacesResponse = z.object({ namespaces: z.array(z.string()), nextAfter: z.string().nullable() });
export type KvNamespacesResult = z.infer<typeof kvNamespacesResponse>;

export const kvListResponse = z.object({
  items: z.array(kvEntry.omit({ namespace: true })),
  nextAfter: z.string().nullable(),
});
export type KvListResult = z.infer<typeof kvListResponse>;

/** One entry of a transaction's `kvResults` (PROTOCOL §5.7). */
export type KvOpResult = {
  op: 'set' | 'incr' | 'delete';
  namespace: string;
  key: string;
  value: unknown;
  version: number | null;
  applied: boolean;
  deleted: boolean;
};

/** One entry of a transaction's `timerResults` (PROTOCOL §5.7). */
export type TimerResult = {
  timerId: string;
  fireAt: string;
  status: 'scheduled' | 'duplicate';
};

function route<const S extends RouteSpec>(spec: S): S {
  return spec;
}

export const kvRoutes = {
  kvNamespaces: route({ method: 'GET', url: '/api/v1/kv', level: 'read-only', summary: 'List KV namespaces in bytewise order', query: kvNamespacesQuery, response: kvNamespacesResponse }),
  kvList: route({ method: 'GET', url: '/api/v1/kv/:namespace', level: 'read-only', summary: 'List KV keys in bytewise order', params: kvNamespaceParams, query: kvListQuery, response: kvListResponse }),
  kvGet: route({ method: 'GET', url: '/api/v1/kv/:namespace/:key', level: 'read-only', summary: 'Read one KV key', params: kvKeyParams, response: kvEntry }),
  kvPut: route({ method: 'PUT', url: '/api/v1/kv/:namespace/:key', level: 'read-write', summary: 'Write one KV key (compare-and-set with expectedVersion)', params: kvKeyParams, body: kvPutBody, response: kvPutResponse }),
  kvDelete: route({ method: 'DELETE', url: '/api/v1/kv/:namespace/:key', level: 'read-write', summary: 'Delete one KV key', params: kvKeyParams, query: kvDeleteQuery, response: kvDeleteResponse }),
  kvIncr: route({ method: 'POST', url: '/api/v1/kv/:namespace/:key/incr', level: 'read-write', summary: 'Add to an integer KV value, admission-checked against max', params: kvKeyParams, body: kvIncrBody, response: kvIncrResponse }),
} satisfies Record<string, RouteSpec>;
