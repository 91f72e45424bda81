import type { KeyByStage, OperatorContext, TransformStage } from './plugins.js';
import { chainError } from './chain-error.js';

function requireFunction(name: string, fn: unknown): void {
  if (typeof fn !== 'function') throw chainError(`.${name}() requires a function`);
}

/** `map(fn)`: one value in, one value out. */
export function mapStage<T, U>(fn: (value: T, ctx: OperatorContext) => U): TransformStage {
  requireFunction('map', fn);
  return { kind: 'map', code: fn.toString(), transform: (value, ctx) => [fn(value, ctx)] };
}

/** `filter(fn)`: keeps the value when fn returns truthy. */
export function filterStage<T>(fn: (value: T, ctx: OperatorContext) => unknown): TransformStage {
  requireFunction('filter', fn);
  return { kind: 'filter', code: fn.toString(), transform: (value, ctx) => (fn(value, ctx) ? [value] : []) };
}

/** `flatMap(fn)`: fn returns an iterable (array) of values; each becomes an output. */
export function flatMapStage<T, U>(fn: (value: T, ctx: OperatorContext) => Iterable<U> | null | undefined): TransformStage {
  requireFunction('flatMap', fn);
  return {
    kind: 'flatMap',
    code: fn.toString(),
    transform: (value, ctx) => {
      const out = fn(value, ctx);
      if (out === null || out === undefined) return [];
      if (typeof (out as Iterable<U>)[Symbol.iterator] !== 'function' || typeof out === 'string') {
        throw chainError('.flatMap() function must return an array or iterable');
      }
      return [...out];
    },
  };
}

/** `keyBy(fn)`: the state key becomes String(fn(value)). */
export function keyByStage<T>(fn: (value: T, ctx: OperatorContext) => string | number): KeyByStage {
  requireFunction('keyBy', fn);
  return { kind: 'keyBy', code: fn.toString(), key: fn };
}
