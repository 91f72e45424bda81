import type { RunnerContext } from '../context/runner-context.js';
import { rowsByKey } from '../context/state-api.js';
import type { CyclePushItem, CycleSourceAckWire, StateRow } from '../context/wire.js';
import { OperatorError, runPostStages } from '../commit/pre-ops.js';
import { sinkOutputs, type EffectsDone, type SinkOutput } from '../commit/sink-output.js';
import { commitCycle, outcomeOf, retryOnConflict, type CycleOptions, type Outcome, type PartitionBatch } from '../commit/commit.js';
import { foldJoin, joinStateKeys, type JoinFold, type JoinInput } from './join-fold.js';
import { noteJoinHeld, watchJoinShard } from './join-held.js';
import { joinShardId } from './join-shard.js';

// The join cycle: read the shard's rows, fold the batch (join-fold.ts, pure),
// push the pairs, commit the rows, the pushes and the source acks in one
// transaction. A batch may carry both sides (`with`): then one transaction
// acks both source partitions.

/** A fold's outputs through the stages after the join, as the sink's push items. */
export async function joinPushItems(rt: RunnerContext, shard: string, partition: string, outputs: JoinFold['outputs'], effectsDone?: EffectsDone): Promise<CyclePushItem[]> {
  const sinkOuts: SinkOutput[] = outputs.map((o) => {
    const ctx = { partition, partitionId: shard, key: o.key, offset: o.offset };
    return { identity: o.identity, values: runPostStages(rt.plan.post, o.value, ctx), ctx };
  });
  return sinkOutputs(rt.plan, rt.queryId, shard, sinkOuts, effectsDone);
}

/** The source ack of one side's batch: its own partition, its own lease. */
function sourceAck(batch: PartitionBatch): CycleSourceAckWire {
  const last = batch.messages[batch.messages.length - 1]!;
  return { partition_id: batch.partitionId, transactionId: last.transactionId, leaseId: batch.leaseId, status: 'completed' };
}

/**
 * One join cycle over a batch of one side, with the other side's pending
 * messages of the same partition name when the partner pop finds any: then
 * one transaction commits the rows, the pairs and both sources' acks. A user
 * function that throws while a partner batch rides along recomputes the
 * cycle without it (its lease lapses and it comes back through its own pop,
 * where the poison rules apply to it alone).
 */
export async function joinCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  const partner = rt.joinPartner && opts.releaseLease ? await rt.joinPartner(batch.side === 'right' ? 'left' : 'right', batch.partition).catch(() => null) : null;
  if (!partner) return joinAttempts(rt, batch, opts);
  try {
    return await joinAttempts(rt, batch, opts, partner.batch);
  } catch (err) {
    if (!(err instanceof OperatorError)) throw err;
    return joinAttempts(rt, batch, opts);
  } finally {
    partner.done();
  }
}

async function joinAttempts(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions, also?: PartitionBatch): Promise<Outcome> {
  const { plan } = rt;
  const join = plan.join!;
  const shard = joinShardId(plan.sourceQueue, batch.partition);
  const batches = [batch, ...(also ? [also] : [])].sort((a, b) => (a.side === b.side ? 0 : a.side === 'left' ? -1 : 1));
  const inputs: JoinInput[] = batches.map((b) => ({ side: b.side ?? 'left', messages: b.messages }));

  return retryOnConflict(rt, shard, async () => {
    // First the rows of the batch's keys; every row of the shard only when a held record may leave.
    const read = async (keys?: string[]): Promise<StateRow[] | undefined> => {
      try {
        return await rt.api.stateGet({ query_id: rt.queryId, partition_id: shard, ...(keys ? { keys } : {}) });
      } catch (err) {
        rt.report(err, { phase: 'state-get', partitionId: shard });
        return undefined;
      }
    };
    const some = await read(joinStateKeys(join.options, inputs));
    if (!some) return 'none';
    let fold = foldJoin(join.options, rowsByKey(some), inputs, batch.partition, false);
    if (fold.needsAllRows) {
      const all = await read();
      if (!all) return 'none';
      fold = foldJoin(join.options, rowsByKey(all), inputs, batch.partition);
    }
    const pushItems = await joinPushItems(rt, shard, batch.partition, fold.outputs, opts.effectsDone);
    watchJoinShard(rt, shard, batch.partition);
    const result = await commitCycle(rt, {
      partitionId: shard,
      partition: batch.partition,
      stateOps: fold.stateOps,
      pushItems,
      ack: null,
      sourceAcks: batches.map(sourceAck),
      releaseLease: opts.releaseLease,
      messages: batches.reduce((n, b) => n + b.messages.length, 0),
      emits: fold.outputs.length,
      onCommitted: () => {
        rt.metrics.lateEventsTotal += fold.late;
        noteJoinHeld(rt, shard, batch.partition, fold.expiresAt);
      },
    });
    return outcomeOf(result);
  });
}
