import type { Json } from './plugins.js';
import { chainError } from './chain-error.js';

/**
 * The fold of a window. Accumulators are JSON because they live in state rows
 * between cycles; `result` turns an accumulator into the emitted payload.
 */
export interface Reducer {
  readonly kind: 'reduce' | 'aggregate';
  /** Aggregate field names (sorted) — they enter the config hash. */
  readonly fields: readonly string[];
  init(): Json;
  add(acc: Json, input: unknown): Json;
  result(acc: Json): unknown;
  /**
   * Combines the accumulators of two windows that merge (sessions bridged by
   * an out-of-order event). `aggregate` always has it; `reduce` only when the
   * user passes `{ merge }` — a merging window without it is rejected by
   * `compile()`, because the raw events are not kept to re-fold.
   */
  merge?(a: Json, b: Json): Json;
}

export type Extractor<In = any> = (value: In) => unknown;

function isNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/**
 * `aggregate({name: extractor})` (S27): `count` adds its extractor's numeric
 * result, else 1; `min`/`max`/`avg` use numbers only and are null until one
 * arrives; `sum` and every other name add numbers only.
 */
export function aggregateReducer(spec: Record<string, unknown>): Reducer {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) throw chainError('.aggregate() takes an object of {name: extractor}');
  const names = Object.keys(spec);
  if (names.length === 0) throw chainError('.aggregate() needs at least one extractor');
  for (const name of names) {
    if (typeof spec[name] !== 'function') throw chainError(`.aggregate(): extractor "${name}" must be a function`);
  }
  const extractors = spec as Record<string, Extractor>;
  return {
    kind: 'aggregate',
    fields: [...names].sort(),
    init() {
      const acc: Record<string, Json> = {};
      for (const name of names) {
        if (name === 'min' || name === 'max') acc[name] = null;
        else if (name === 'avg') acc[name] = { sum: 0, n: 0 };
        else acc[name] = 0;
      }
      return acc;
    },
    add(accJson, input) {
      const acc = accJson as Record<string, any>;
      for (const name of names) {
        const v = extractors[name]!(input);
        switch (name) {
          case 'count':
            acc.count = (acc.count ?? 0) + (isNumber(v) ? v : 1);
            break;
          case 'min':
            if (isNumber(v)) acc.min = acc.min === null || acc.min === undefined ? v : Math.min(acc.min, v);
            break;
          case 'max':
            if (isNumber(v)) acc.max = acc.max === null || acc.max === undefined ? v : Math.max(acc.max, v);
            break;
          case 'avg': {
            const cur = acc.avg ?? { sum: 0, n: 0 };
            if (isNumber(v)) acc.avg = { sum: cur.sum + v, n: cur.n + 1 };
            else acc.avg = cur;
            break;
          }
          default:
            if (isNumber(v)) acc[name] = (acc[name] ?? 0) + v;
        }
      }
      return acc;
    },
    merge(aJson, bJson) {
      const a = aJson as Record<string, any>;
      const b = bJson as Record<string, any>;
      const acc: Record<string, Json> = {};
      for (const name of names) {
        const x = a[name];
        const y = b[name];
        if (name === 'min' || name === 'max') {
          const pick = name === 'min' ? Math.min : Math.max;
          acc[name] = isNumber(x) && isNumber(y) ? pick(x, y) : isNumber(x) ? x : isNumber(y) ? y : null;
        } else if (name === 'avg') {
          const p = x ?? { sum: 0, n: 0 };
          const q = y ?? { sum: 0, n: 0 };
          acc.avg = { sum: p.sum + q.sum, n: p.n + q.n };
        } else {
          acc[name] = (isNumber(x) ? x : 0) + (isNumber(y) ? y : 0);
        }
      }
      return acc;
    },
    result(accJson) {
      const acc = accJson as Record<string, any>;
      const out: Record<string, unknown> = {};
      for (const name of names) {
        if (name === 'avg') out.avg = acc.avg && acc.avg.n > 0 ? acc.avg.sum / acc.avg.n : null;
        else out[name] = acc[name] ?? null;
      }
      return out;
    },
  };
}

/** Options of `reduce(fn, initial, options)`. */
export interface ReduceOptions<A> {
  /** Combines two windows' accumulators when they merge (session windows need it). */
  merge?: (a: A, b: A) => A;
}

/**
 * `reduce(fn, initial)`: each window starts from its own deep copy of
 * `initial` (S28: mutating one window's accumulator never shows in another).
 * A plain-object accumulator is emitted as is; anything else as `{value}`.
 */
export function reduceReducer<A>(fn: (acc: A, value: any) => A, initial: A, options?: ReduceOptions<A>): Reducer {
  if (typeof fn !== 'function') throw chainError('.reduce() requires a function');
  const merge = options?.merge;
  if (merge !== undefined && typeof merge !== 'function') throw chainError('.reduce(): options.merge must be a function');
  if (initial === undefined) throw chainError('.reduce() requires an initial value (JSON)');
  let frozen: string;
  try {
    frozen = JSON.stringify(initial);
  } catch {
    throw chainError('.reduce(): the initial value must be JSON');
  }
  return {
    kind: 'reduce',
    fields: [],
    init: () => JSON.parse(frozen),
    add: (acc, input) => {
      const next = fn(acc as A, input);
      // A reducer returning undefined would lose the row; store null instead.
      return (next === undefined ? null : next) as Json;
    },
    result: (acc) => (acc !== null && typeof acc === 'object' && !Array.isArray(acc) ? acc : { value: acc }),
    ...(merge
      ? {
          merge: (a: Json, b: Json) => {
            const next = merge(a as A, b as A);
            return (next === undefined ? null : next) as Json;
          },
        }
      : {}),
  };
}
