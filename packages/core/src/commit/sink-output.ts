import type { CompiledQuery } from '../plan/compile.js';
import type { OperatorContext, SinkPlugin } from '../plan/plugins.js';
import type { CyclePushItem } from '../context/wire.js';
import { payloadOf } from '../context/source-message.js';
import { sinkTransactionId } from './transaction-id.js';
import { OperatorError } from './pre-ops.js';

/** The values one emit (a closed window, or one source message) hands to the sink. */
export interface SinkOutput {
  /** PROTOCOL §7.6 identity: the window key, or `msg␟<offset>`. */
  identity: string;
  values: readonly unknown[];
  ctx: OperatorContext;
}

/**
 * The effects one batch has already run, by `identity␟outputIndex`. A cycle
 * recomputed after VERSION_CONFLICT hands the same set back to sinkOutputs,
 * so an effect does not run a second time for an emit it already served.
 */
export type EffectsDone = Set<string>;

/**
 * Turns outputs into the cycle's push items, each with its deterministic
 * transactionId (outputIndex numbers the items of one emit), or runs the
 * sink's effect (foreach: before the cycle commits — at-least-once). With
 * `effectsDone`, an effect already run for an emit of this batch is skipped.
 */
export async function sinkOutputs(
  plan: CompiledQuery,
  queryId: string,
  partitionId: string,
  outputs: readonly SinkOutput[],
  effectsDone?: EffectsDone,
): Promise<CyclePushItem[]> {
  return sinkPushItems(plan.sink, queryId, partitionId, outputs, effectsDone);
}

/**
 * {@link sinkOutputs} for any sink of the chain: the `.to()` sink, or the
 * window's `onLate` sink (late records).
 */
export async function sinkPushItems(
  sink: SinkPlugin | undefined,
  queryId: string,
  partitionId: string,
  outputs: readonly SinkOutput[],
  effectsDone?: EffectsDone,
): Promise<CyclePushItem[]> {
  const items: CyclePushItem[] = [];
  if (!sink) return items;
  for (const out of outputs) {
    let index = 0;
    for (const value of out.values) {
      const payload = payloadOf(value);
      if (sink.toPushItems) {
        let produced;
        try {
          produced = sink.toPushItems(payload, out.ctx);
        } catch (err) {
          throw new OperatorError(sink.kind, err, out.ctx.offset);
        }
        for (const item of produced) {
          items.push({
            queue: item.queue,
            partition: item.partition ?? out.ctx.partition,
            payload: item.payload === undefined ? null : item.payload,
            transactionId: sinkTransactionId(queryId, partitionId, out.identity, index++),
          });
        }
      } else if (sink.effect) {
        const done = `${out.identity}\u001f${index++}`;
        if (effectsDone?.has(done)) continue;
        try {
          await sink.effect(payload, out.ctx);
        } catch (err) {
          throw new OperatorError(sink.kind, err, out.ctx.offset);
        }
        effectsDone?.add(done);
      }
    }
  }
  return items;
}
