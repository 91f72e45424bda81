import type { z } from 'zod';

// PROTOCOL §1.1: `null` means absent. Queen's own clients send `error: null`,
// `consumerGroup: null`, `options: null`, ... for what they do not set, so
// every optional field of every request accepts null and reads it as not
// given. The rule is applied here, once, by walking each request schema,
// rather than by writing `.nullable()` beside every `.optional()`: a field
// added later gets it without anyone remembering to.
//
// A field whose schema itself accepts null (queue options, where null resets
// one option to its default; `sink_queue`; the cycle's `ack`; any payload or
// KV value) keeps its own meaning for null and is left alone.

/** Turns a request part into the same value with absent-meaning nulls removed. */
export type AbsentNulls = (value: unknown) => unknown;

const same: AbsentNulls = (value) => value;
const DROP = Symbol('drop');

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  innerType?: z.ZodType;
  in?: z.ZodType;
  options?: z.ZodType[];
  discriminator?: string;
}

interface Internals {
  def: Def;
  values?: Set<unknown>;
}

const internals = (schema: z.ZodType) => (schema as unknown as { _zod: Internals })._zod;

/** Layers that wrap one schema without changing its shape. */
const WRAPPERS = new Set(['optional', 'default', 'prefault', 'nullable', 'nonoptional', 'readonly', 'catch']);

/** The schema that decides the shape of the input: below optional/default/... wrappers and the input side of pipes. */
function core(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    const def = internals(s).def;
    if (WRAPPERS.has(def.type) && def.innerType) s = def.innerType;
    else if (def.type === 'pipe' && def.in) s = def.in;
    else return s;
  }
}

function acceptsNull(schema: z.ZodType): boolean {
  const def = internals(schema).def;
  switch (def.type) {
    case 'nullable':
    case 'null':
    case 'unknown':
    case 'any':
      return true;
    case 'union':
      return (def.options ?? []).some(acceptsNull);
    case 'pipe':
      return def.in ? acceptsNull(def.in) : false;
    default:
      return WRAPPERS.has(def.type) && def.innerType ? acceptsNull(def.innerType) : false;
  }
}

/** Optional or defaulted: the object accepts the key being absent. Asked once per field, when a route is compiled. */
const optional = (schema: z.ZodType) => schema.safeParse(undefined).success;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Rewrites the keys of a record that `next` changes, copying the record
 * only when one does (most requests carry no null to drop).
 */
function rewriteKeys(value: Record<string, unknown>, keys: readonly string[], next: (key: string, v: unknown) => unknown): Record<string, unknown> {
  let out = value;
  for (const key of keys) {
    if (!Object.hasOwn(value, key)) continue;
    const v = value[key];
    const n = next(key, v);
    if (n === v) continue;
    if (out === value) out = { ...value };
    if (n === DROP) delete out[key];
    else out[key] = n;
  }
  return out;
}

function forBody(schema: z.ZodType): AbsentNulls {
  const s = core(schema);
  const def = internals(s).def;
  if (def.type === 'object' && def.shape) {
    const fields = new Map<string, { drop: boolean; inner: AbsentNulls }>();
    for (const [key, field] of Object.entries(def.shape)) {
      const drop = optional(field) && !acceptsNull(field);
      const inner = forBody(field);
      if (drop || inner !== same) fields.set(key, { drop, inner });
    }
    if (fields.size === 0) return same;
    const keys = [...fields.keys()];
    return (value) =>
      isRecord(value)
        ? rewriteKeys(value, keys, (key, v) => {
            const f = fields.get(key)!;
            return v === null ? (f.drop ? DROP : v) : f.inner(v);
          })
        : value;
  }
  if (def.type === 'array' && def.element) {
    const element = forBody(def.element);
    if (element === same) return same;
    return (value) => {
      if (!Array.isArray(value)) return value;
      let out = value;
      for (let i = 0; i < value.length; i++) {
        const n = element(value[i]);
        if (n === value[i]) continue;
        if (out === value) out = value.slice();
        out[i] = n;
      }
      return out;
    };
  }
  if (def.type === 'union' && def.discriminator && def.options) {
    // A discriminated union (transaction operations, KV ops, state ops): the
    // option is chosen by its literal tag, as zod itself will choose it.
    const tag = def.discriminator;
    const byTag = new Map<unknown, AbsentNulls>();
    for (const option of def.options) {
      const shape = internals(core(option)).def.shape;
      const literal = shape?.[tag];
      const inner = forBody(option);
      if (!literal || inner === same) continue;
      for (const v of internals(literal).values ?? []) byTag.set(v, inner);
    }
    if (byTag.size === 0) return same;
    return (value) => (isRecord(value) ? (byTag.get(value[tag]) ?? same)(value) : value);
  }
  // Scalars, payloads, records of free-form values: nothing to drop inside.
  return same;
}

function forQuery(schema: z.ZodType): AbsentNulls {
  const def = internals(core(schema)).def;
  if (def.type !== 'object' || !def.shape) return same;
  const fields = Object.entries(def.shape).filter(([, field]) => optional(field));
  if (fields.length === 0) return same;
  const byKey = new Map(fields);
  const keys = fields.map(([key]) => key);
  // A query string cannot carry JSON null; its spelling is the text `null`
  // (what URLSearchParams makes of a JS null). It reads as absent only where
  // the field would reject it, so a consumer group or partition really named
  // "null" keeps its name. An empty value (`batch=`) is not null: still a 400.
  return (value) =>
    isRecord(value) ? rewriteKeys(value, keys, (key, v) => (v === 'null' && !byKey.get(key)!.safeParse(v).success ? DROP : v)) : value;
}

/**
 * Compiles, once per route, the step that reads `null` as absent in a
 * request body (at every depth the schema describes: batch ack items,
 * transaction operations, push items, ...) or in a query string (the text
 * `null`). Run it on
 * the raw value before the schema; it copies only what it changes.
 */
export function absentNulls(schema: z.ZodType, where: 'body' | 'query'): AbsentNulls {
  return where === 'body' ? forBody(schema) : forQuery(schema);
}

/**
 * The same rule for a JSON Schema of a request body (`io: 'input'`): every
 * property an object does not require also admits `null`, so
 * `/openapi.json` says what the broker accepts.
 */
export function nullableWhereOptional(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(nullableWhereOptional);
  if (!isRecord(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === 'properties' ? v : nullableWhereOptional(v);
  if (isRecord(node.properties)) {
    const required = new Set(Array.isArray(node.required) ? node.required : []);
    const props: Record<string, unknown> = {};
    for (const [name, prop] of Object.entries(node.properties)) {
      const inner = nullableWhereOptional(prop);
      props[name] = required.has(name) || admitsNull(inner) ? inner : { anyOf: [inner, { type: 'null' }] };
    }
    out.properties = props;
  }
  return out;
}

const CONSTRAINTS = ['type', 'anyOf', 'oneOf', 'allOf', 'const', 'enum', '$ref', 'not'];

function admitsNull(schema: unknown): boolean {
  if (!isRecord(schema)) return true; // `true`: anything
  // No constraint on the value at all (`{}`, or only a description): anything.
  if (!CONSTRAINTS.some((k) => k in schema)) return true;
  const type = schema.type;
  if (type === 'null' || (Array.isArray(type) && type.includes('null'))) return true;
  for (const key of ['anyOf', 'oneOf']) {
    const list = schema[key];
    if (Array.isArray(list) && list.some(admitsNull)) return true;
  }
  return false;
}
