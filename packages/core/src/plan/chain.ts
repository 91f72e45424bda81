import { MERGING_END_RULE, type Json, type PipeStage, type SinkPlugin, type WindowPlugin } from './plugins.js';
import type { Reducer } from './reducer.js';
import { chainError } from './chain-error.js';
import { SEP } from './keys.js';
import { windowTag } from './window-tag.js';

import type { ResolvedWindowOptions } from './window-options.js';
import type { StageMeta } from './stage-options.js';
import type { ResolvedJoinOptions } from './join-options.js';
import type { LookupStage } from './lookup.js';

export type { ResolvedWindowOptions } from './window-options.js';

/** One link of an operator chain, in the order it was built, with its name and code (issue 33). */
export type ChainStage = (
  | { type: 'pipe'; stage: PipeStage }
  | { type: 'window'; plugin: WindowPlugin; tag: string; options: ResolvedWindowOptions }
  | { type: 'reduce'; reducer: Reducer }
  | { type: 'sink'; sink: SinkPlugin }
  | { type: 'join'; rightQueue: string; rightPartition?: string; options: ResolvedJoinOptions }
  | { type: 'lookup'; lookup: LookupStage }
) &
  StageMeta;

function describe(stage: ChainStage): string {
  switch (stage.type) {
    case 'pipe':
      return `.${stage.stage.kind}()`;
    case 'window':
      return `the ${stage.plugin.kind} window`;
    case 'reduce':
      return `.${stage.reducer.kind}()`;
    case 'sink':
      return `.to()`;
    case 'join':
      return '.join()';
    case 'lookup':
      return '.lookup()';
  }
}

/**
 * The build-time rules (S1, S2): each is checked when the offending link is
 * appended, so the error is thrown synchronously by the call that broke the
 * chain. Whole-chain rules live in `compile.ts`.
 */
export function checkAppend(chain: readonly ChainStage[], next: ChainStage): void {
  const label = describe(next);
  const sink = chain.find((s) => s.type === 'sink');
  if (sink) throw chainError(`${label} cannot follow ${sink.sink.kind === 'foreach' ? '.foreach()' : '.to()'}: a sink must be the last operator`);
  const hasGate = chain.some((s) => s.type === 'pipe' && s.stage.kind === 'gate');
  const hasWindow = chain.some((s) => s.type === 'window');
  const hasReducer = chain.some((s) => s.type === 'reduce');
  const hasJoin = chain.some((s) => s.type === 'join');
  const hasLookup = chain.some((s) => s.type === 'lookup');

  if (next.type === 'join') {
    if (hasJoin) throw chainError('only one .join() per stream: join the joined stream\'s output queue in a second stream');
    if (chain.length > 0) throw chainError(`.join() must come right after Stream.from(): it reads both queues' messages as they are (found ${describe(chain[0]!)} before it)`);
    return;
  }
  if (next.type === 'lookup') {
    if (hasJoin || hasWindow || hasGate) throw chainError('.lookup() is for a stream without a window, gate or join (map, filter, flatMap, lookup, then a sink)');
    return;
  }
  if (hasLookup && (next.type === 'window' || (next.type === 'pipe' && (next.stage.kind === 'gate' || next.stage.kind === 'keyBy')))) {
    throw chainError(`${label} cannot follow .lookup(): a lookup is for a stream without a window or gate`);
  }
  if (hasJoin && next.type !== 'sink' && !(next.type === 'pipe' && next.stage.kind !== 'gate' && next.stage.kind !== 'keyBy')) {
    throw chainError(`${label} cannot follow .join(): after a join come map, filter, flatMap and a sink`);
  }

  if (next.type === 'pipe') {
    const stage = next.stage;
    if (stage === null || typeof stage !== 'object' || typeof stage.kind !== 'string' || stage.kind === '') {
      throw chainError('.pipe() takes a stage object with a kind');
    }
    if (stage.kind === 'gate') {
      if (typeof (stage as { evaluate?: unknown }).evaluate !== 'function') throw chainError('.gate() requires a function');
      if (hasGate) throw chainError('only one .gate() per stream: chain two streams if you need two decisions');
      if (hasWindow || hasReducer) throw chainError('.gate() is incompatible with a window and reducer in the same stream');
    } else if (stage.kind === 'keyBy') {
      if (typeof (stage as { key?: unknown }).key !== 'function') throw chainError('.keyBy() requires a function');
      if (hasGate) throw chainError('.keyBy() must come before the gate');
      if (hasWindow) throw chainError('.keyBy() must come before the window');
    } else if (typeof (stage as { transform?: unknown }).transform !== 'function') {
      throw chainError(`.${stage.kind}() requires a function`);
    }
    return;
  }
  if (next.type === 'window') {
    if (hasWindow) throw chainError('only one window per stream');
    if (hasGate) throw chainError('a window is incompatible with .gate() in the same stream');
    return;
  }
  if (next.type === 'reduce') {
    if (!hasWindow) throw chainError(`.${next.reducer.kind}() requires a preceding window`);
    if (hasReducer) throw chainError('only one reduce() or aggregate() per stream');
    return;
  }
  const s = next.sink;
  if (s === null || typeof s !== 'object' || typeof s.kind !== 'string' || (typeof s.toPushItems !== 'function' && typeof s.effect !== 'function')) {
    throw chainError('.to() takes a sink plugin with toPushItems() or effect()');
  }
}

/**
 * A window plugin's own contract, checked when it is appended: a kind, an
 * assign, and merging said in the interface (a merging window declares its
 * end rule and has a merge; a `merge` without the declaration is refused
 * rather than silently switching the end rules). Answers the state-row tag.
 */
export function checkWindowPlugin(plugin: WindowPlugin): string {
  if (plugin === null || typeof plugin !== 'object') throw chainError('.window() takes a window plugin');
  if (typeof plugin.kind !== 'string' || plugin.kind === '' || plugin.kind.includes(SEP)) throw chainError('a window plugin needs a kind (a non-empty string without U+001F)');
  if (typeof plugin.assign !== 'function') throw chainError(`window plugin "${plugin.kind}" has no assign()`);
  const declared = (plugin as { merging?: unknown }).merging;
  const merge = (plugin as { merge?: unknown }).merge;
  if (declared !== undefined && declared !== MERGING_END_RULE) {
    throw chainError(`window plugin "${plugin.kind}": merging must be ${JSON.stringify(MERGING_END_RULE)} (the end rule core applies), got ${JSON.stringify(declared)}`);
  }
  if (declared === MERGING_END_RULE && typeof merge !== 'function') throw chainError(`window plugin "${plugin.kind}" declares merging but has no merge()`);
  if (declared === undefined && merge !== undefined) {
    throw chainError(
      `window plugin "${plugin.kind}" has a merge() but does not declare merging: ${JSON.stringify(MERGING_END_RULE)}; a merging window states its end rule (inclusive ends, one open row per key)`,
    );
  }
  return windowTag(plugin);
}

/**
 * The chain's STRUCTURE as JSON (S5): operator kinds in order, window shape,
 * reducer kind and aggregate field names, sink shape, eventTime presence,
 * allowedLateness and onLate (a late sink by kind and shape). Never closures,
 * idleFlushMs, idleTimeoutMs or gracePeriod:
 * those can change on a redeploy without invalidating stored accumulators.
 */
export function chainStructure(chain: readonly ChainStage[]): Json {
  return chain.map((s): Json => {
    switch (s.type) {
      case 'pipe':
        return s.stage.kind === 'keyBy' ? { op: 'keyBy' } : { op: s.stage.kind, shape: (s.stage as { shape?: Json }).shape ?? null };
      case 'window':
        return {
          op: 'window',
          kind: s.plugin.kind,
          shape: s.plugin.shape ?? null,
          eventTime: s.options.eventTime !== undefined,
          allowedLateness: s.options.allowedLateness,
          // A late sink is structure like the main sink (where late records go); the strings keep their old hashes.
          onLate: s.options.lateSink ? { sink: s.options.lateSink.kind, shape: s.options.lateSink.shape ?? null } : s.options.onLate,
        };
      case 'reduce':
        return { op: s.reducer.kind, fields: [...s.reducer.fields] };
      case 'sink':
        return { op: 'sink', kind: s.sink.kind, shape: s.sink.shape ?? null };
      case 'join':
        // What a buffered record means: the other queue, the join type, whose clock. Not `within` or the grace: a record keeps its meaning under another bound.
        return { op: 'join', right: s.rightQueue, type: s.options.type, eventTime: s.options.eventTimeLeft !== undefined };
      case 'lookup':
        return { op: 'lookup', namespace: s.lookup.namespace, as: s.lookup.as, missing: s.lookup.missing };
    }
  });
}
