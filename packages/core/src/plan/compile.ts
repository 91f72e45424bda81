import { isMergingWindow, type GateStage, type Json, type KeyByStage, type SinkPlugin, type TransformStage, type WindowPlugin } from './plugins.js';
import type { Reducer } from './reducer.js';
import { chainStructure, type ChainStage, type ResolvedWindowOptions } from './chain.js';
import { chainError } from './chain-error.js';
import { configHash } from './config-hash.js';
import { describeStages } from './stage-descriptors.js';
import type { MigrateState } from './stage-options.js';
import type { StreamStage } from '@queen-mq/protocol';
import type { ResolvedJoinOptions } from './join-options.js';
import type { LookupStage } from './lookup.js';

/** A stage that runs per value before a window or gate. */
export type PreStage = TransformStage | KeyByStage | LookupStage;

/**
 * A validated chain, split into what the runner executes: the per-message
 * operators, then a window+reducer OR a gate OR nothing (stateless), then the
 * post operators and the sink.
 */
export interface CompiledQuery {
  /** 64 lowercase hex, sent as `config_hash` on register. */
  readonly configHash: string;
  /** The JSON the hash is computed from. */
  readonly structure: Json;
  /** Every stage with its stable name and hashes, sent on register (issue 33). */
  readonly stages: readonly StreamStage[];
  /** The stage given a `migrateState`, if any (one per chain: the query's rows are migrated once). */
  readonly migration?: { stage: string; migrateState: MigrateState };
  /** The gate's `stateTtlSeconds`: its key rows expire after that long unwritten (the broker's maintenance pass). */
  readonly stateTtlSeconds?: number;
  readonly sourceQueue: string;
  /**
   * The one partition of the source this query reads (a pinned source), or
   * null for every partition. Not part of the config hash: it decides which
   * partitions are popped, not the shape of a partition's state, so runners of
   * one query may each read their own partition.
   */
  readonly sourcePartition: string | null;
  readonly sinkQueue: string | null;
  readonly shape: 'window' | 'gate' | 'join' | 'stateless';
  readonly pre: readonly PreStage[];
  /** The window, its state-row tag (given or derived) and its resolved options. */
  readonly window?: { plugin: WindowPlugin; tag: string; options: ResolvedWindowOptions };
  readonly reducer?: Reducer;
  readonly gate?: GateStage;
  /** The interval join: the other (right) queue, pinned like the source or not, and its resolved options. */
  readonly join?: { rightQueue: string; rightPartition: string | null; options: ResolvedJoinOptions };
  /** Whether a `.lookup()` is among the pre stages (its cycle reads the KV and commits with the versions read). */
  readonly lookups: boolean;
  readonly post: readonly TransformStage[];
  readonly sink?: SinkPlugin;
}

/** Whole-chain rules (S4) and the split; throws before any HTTP request. */
export function compileChain(sourceQueue: string, chain: readonly ChainStage[], sourcePartition?: string): CompiledQuery {
  const pre: PreStage[] = [];
  const post: TransformStage[] = [];
  let window: CompiledQuery['window'];
  let reducer: Reducer | undefined;
  let gate: GateStage | undefined;
  let sink: SinkPlugin | undefined;
  let join: CompiledQuery['join'];
  for (let i = 0; i < chain.length; i++) {
    const s = chain[i]!;
    if (s.type === 'window') {
      const next = chain[i + 1];
      if (!next || next.type !== 'reduce') {
        throw chainError(`the ${s.plugin.kind} window requires a downstream .reduce() or .aggregate() directly after it`);
      }
      if (isMergingWindow(s.plugin) && typeof next.reducer.merge !== 'function') {
        throw chainError(`the ${s.plugin.kind} window merges windows: pass .reduce(fn, initial, { merge }) or use .aggregate()`);
      }
      window = { plugin: s.plugin, tag: s.tag, options: s.options };
    } else if (s.type === 'reduce') {
      reducer = s.reducer;
    } else if (s.type === 'sink') {
      sink = s.sink;
    } else if (s.type === 'join') {
      join = { rightQueue: s.rightQueue, rightPartition: s.rightPartition ?? null, options: s.options };
    } else if (s.type === 'lookup') {
      pre.push(s.lookup);
    } else if (s.stage.kind === 'gate') {
      gate = s.stage as GateStage;
    } else if (window || gate || join) {
      // keyBy after a window or gate is rejected when it is appended.
      post.push(s.stage as TransformStage);
    } else {
      pre.push(s.stage as PreStage);
    }
  }
  const structure = chainStructure(chain);
  const stages = describeStages(chain);
  const migrating = chain.flatMap((s, i) => (s.migrateState ? [{ stage: stages[i]!.name, migrateState: s.migrateState }] : []));
  if (migrating.length > 1) throw chainError(`only one stage may have a migrateState (the query's state rows are migrated once): ${migrating.map((m) => m.stage).join(', ')}`);
  return {
    configHash: configHash(structure),
    structure,
    stages,
    ...(migrating[0] ? { migration: migrating[0] } : {}),
    ...(chain.some((s) => s.stateTtlSeconds !== undefined) ? { stateTtlSeconds: chain.find((s) => s.stateTtlSeconds !== undefined)!.stateTtlSeconds } : {}),
    sourceQueue,
    sourcePartition: sourcePartition ?? null,
    sinkQueue: sink?.sinkQueue ?? null,
    shape: window ? 'window' : gate ? 'gate' : join ? 'join' : 'stateless',
    pre,
    window,
    reducer,
    gate,
    ...(join ? { join } : {}),
    lookups: pre.some((p) => p.kind === 'lookup'),
    post,
    sink,
  };
}
