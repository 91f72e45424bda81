import { chainError, type GateContext, type GateDecision, type GateStage } from '@queen-mq/core';

/**
 * A gate function: called once per message in source order with the key's
 * state row as `ctx.state` (mutable). `true` / `{allow: true}` lets the
 * message through and commits the mutation; `false` / `{allow: false}`
 * discards the mutation and stops the batch (the denied tail stays leased).
 * May be async. Throwing, or answering anything else, commits nothing.
 */
export type GateFn<T = any> = (value: T, ctx: GateContext) => GateDecision | Promise<GateDecision>;

/**
 * The gate stage core runs (`GateStage`): `stream.pipe(gate(fn))`, or
 * `.gate(fn)` through `queen-mq`. Throws VALIDATION_FAILED at build time when
 * `fn` is not a function, so `.gate(5)` fails before any request is sent.
 * Core enforces the chain rules (one gate, no window, keyBy before it).
 */
export function gate<T = any>(fn: GateFn<T>): GateStage {
  if (typeof fn !== 'function') throw chainError(`.gate() requires a function, got ${fn === null ? 'null' : typeof fn}`);
  return Object.freeze({ kind: 'gate' as const, code: fn.toString(), evaluate: (value: T, ctx: GateContext) => fn(value, ctx) });
}
