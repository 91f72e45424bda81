import { z } from 'zod';

// Value rules of PROTOCOL §1.1, written once and shared by every route schema.

const CONTROL = /[\u0000-\u001f\u007f]/;

export const queueName = z
  .string()
  .min(1)
  .max(255)
  .refine((s) => !s.includes('/'), 'must not contain "/"')
  .refine((s) => !CONTROL.test(s), 'must not contain control characters')
  .refine((s) => s.trim() === s, 'must not have leading or trailing spaces');

/** partition, consumerGroup, transactionId: 1–255 chars, no control chars. */
export const name255 = z
  .string()
  .min(1)
  .max(255)
  .refine((s) => !CONTROL.test(s), 'must not contain control characters');

export const uuid = z.string().regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, 'must be a UUID');

/**
 * A W3C Trace Context `traceparent` (version 00: `00-<trace-id>-<parent-id>-<flags>`,
 * lowercase hex). All-zero ids are invalid in the standard and refused here.
 */
export const traceparent = z
  .string()
  .regex(/^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/, 'must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)');

/** Offsets travel as decimal strings of positive 64-bit integers. */
export const offset = z.union([z.string().regex(/^[0-9]{1,19}$/, 'must be a decimal offset'), z.number().int().nonnegative()]).transform(String);

export const isoTime = z.string().refine((s) => /(Z|[+-]\d\d:?\d\d)$/i.test(s) && !Number.isNaN(Date.parse(s)), 'must be an ISO-8601 time with a zone');

/** Query-string boolean: true/1/false/0, anything else is a 400. */
export const queryBool = z.enum(['true', '1', 'false', '0']).transform((v) => v === 'true' || v === '1');

/** Query-string integer in a range; "1.5", "ten" and "" are rejected. */
export function queryInt(min: number, max: number) {
  return z
    .string()
    .regex(/^-?\d+$/, 'must be an integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
}

/** Most rows a listing answers per page (`limit`), and its default. */
export const LIST_MAX_LIMIT = 10000;
export const LIST_DEFAULT_LIMIT = 1000;

/**
 * `?limit=&offset=` of the list routes (queues, a queue's partitions,
 * consumer groups, stream queries): at most LIST_MAX_LIMIT rows a page,
 * LIST_DEFAULT_LIMIT when absent, in the route's stable order.
 */
export const listPageQuery = z.object({
  limit: queryInt(1, LIST_MAX_LIMIT).default(LIST_DEFAULT_LIMIT),
  offset: queryInt(0, 2147483647).default(0),
});
export type ListPageQuery = z.infer<typeof listPageQuery>;

/**
 * A paged listing by name with `?search=` (extension): only names containing
 * that text (case-sensitive), counted in `total` where the route has one.
 * Absent or empty: every name, as in the v1 API.
 */
export const listSearchQuery = listPageQuery.extend({
  search: z.string().max(255).optional(),
});
export type ListSearchQuery = z.infer<typeof listSearchQuery>;

export const payload = z.unknown();
