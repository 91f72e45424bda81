import { QueenError, type Queen } from '@queen-mq/client';
import type { HeldJoinShard, RunnerContext } from '../context/runner-context.js';
import { rowsByKey } from '../context/state-api.js';
import { commitCycle } from '../commit/commit.js';
import { sleep } from '../context/sleep.js';
import { JOIN_CLOCK_KEY } from '../plan/keys.js';
import { expireJoin, joinExpiresAt } from './join-fold.js';
import { joinPushItems } from './join-cycle.js';
import { joinShardId } from './join-shard.js';
import { noteJoinHeld } from './join-held.js';

// The join's idle flush (processing time): a held record leaves when the
// other queue's time passes its bound, and without it a partition whose
// queues went quiet would keep its records (and a left join its unpaired
// orders) until a message came. Every idleFlushMs the runner looks at the
// shards it knows to hold records (rt.joinHeld, kept by every commit) whose
// first record's bound the broker's clock has passed, and expires them in an
// ack:null cycle, as if a record stamped at that clock had come on each
// queue (expireJoin). The broker commits it only once neither queue's
// partition of that name has a message stamped before `clock − grace` still
// to consume (`flush_before` + `flush_sources`, the guard of the windows'
// idle flush), so no record still to come could pair with one that leaves.
// A flush that lost a race with a cycle (VERSION_CONFLICT) or was deferred
// writes nothing; the next tick looks again.

/** Partitions of a queue per page of the queue detail read when seeding. */
const SEED_PAGE = 1000;
/** Shards flushed at once in one pass. */
const FLUSH_CONCURRENCY = 16;

/**
 * A runner that starts after a restart knows no shard yet, but shards of its
 * previous life may hold records: watch every partition name of both queues
 * (the pinned one only), with no expiry known. The first pass reads each
 * one's `__join__` row and keeps those that hold records.
 */
export async function seedJoinShards(rt: RunnerContext, queen: Queen): Promise<void> {
  const { plan } = rt;
  if (plan.sourcePartition !== null) {
    const shard = joinShardId(plan.sourceQueue, plan.sourcePartition);
    if (!rt.joinHeld.has(shard)) rt.joinHeld.set(shard, { partition: plan.sourcePartition });
    return;
  }
  for (const queue of [plan.sourceQueue, plan.join!.rightQueue]) {
    for (let offset = 0; ; ) {
      let page: { name: string }[];
      try {
        page = (await queen.api.queueGet({ params: { queue }, query: { limit: SEED_PAGE, offset }, idempotent: true })).partitions;
      } catch (err) {
        if (err instanceof QueenError && err.code === 'QUEUE_NOT_FOUND') break;
        throw err;
      }
      for (const p of page) {
        const shard = joinShardId(plan.sourceQueue, p.name);
        if (!rt.joinHeld.has(shard)) rt.joinHeld.set(shard, { partition: p.name });
      }
      offset += page.length;
      if (page.length < SEED_PAGE) break;
    }
  }
}

/** One shard's flush at broker time `now`: answers 'deferred' when the broker held it back. */
async function flushShard(rt: RunnerContext, shard: string, held: HeldJoinShard, now: number): Promise<'deferred' | void> {
  const { plan } = rt;
  const options = plan.join!.options;
  const forget = () => {
    // Only the entry this flush judged: a commit since then replaced it.
    if (rt.joinHeld.get(shard) === held) rt.joinHeld.delete(shard);
  };
  const read = (keys?: string[]) => rt.api.stateGet({ query_id: rt.queryId, partition_id: shard, ...(keys ? { keys } : {}) });
  if (held.expiresAt === undefined) {
    const clockRow = rowsByKey(await read([JOIN_CLOCK_KEY])).get(JOIN_CLOCK_KEY);
    const expiresAt = clockRow ? joinExpiresAt(options, clockRow.value) : null;
    if (expiresAt === null) return forget();
    if (expiresAt !== undefined && expiresAt >= now) {
      if (rt.joinHeld.get(shard) === held) rt.joinHeld.set(shard, { partition: held.partition, expiresAt });
      return;
    }
  }
  const fold = expireJoin(options, rowsByKey(await read()), held.partition, now);
  const pushItems = await joinPushItems(rt, shard, held.partition, fold.outputs);
  const result = await commitCycle(rt, {
    partitionId: shard,
    partition: held.partition,
    stateOps: fold.stateOps,
    pushItems,
    ack: null,
    flushBefore: Math.floor(now - options.graceMs),
    flushSources: [
      { queue: plan.sourceQueue, partition: held.partition },
      { queue: plan.join!.rightQueue, partition: held.partition },
    ],
    messages: 0,
    emits: fold.outputs.length,
    onCommitted: () => noteJoinHeld(rt, shard, held.partition, fold.expiresAt),
  });
  if (result === 'deferred') return 'deferred';
}

/**
 * One pass: the watched shards whose expiry the broker's clock has passed
 * (or is unknown), each under its shard's lock, FLUSH_CONCURRENCY at a time.
 * Answers how many the broker deferred.
 */
export async function flushJoinShards(rt: RunnerContext, queen: Queen): Promise<number> {
  if (rt.joinHeld.size === 0) return 0;
  let now: number;
  try {
    now = await rt.clock.nowAfterSync(queen);
  } catch (err) {
    rt.report(err, { phase: 'flush' });
    return 0;
  }
  const due = [...rt.joinHeld].filter(([, h]) => h.expiresAt === undefined || h.expiresAt < now);
  let deferred = 0;
  let next = 0;
  const worker = async () => {
    while (next < due.length && !rt.isStopped()) {
      const [shard, held] = due[next++]!;
      try {
        if ((await rt.locks.run(shard, () => flushShard(rt, shard, held, now))) === 'deferred') deferred += 1;
      } catch (err) {
        rt.report(err, { phase: 'flush', partitionId: shard });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(FLUSH_CONCURRENCY, due.length) }, worker));
  return deferred;
}

/** The join's idle-flush timer (rt.joinIdleFlushMs > 0): seeds the watch, then a pass every idleFlushMs until `signal` aborts. */
export async function joinFlushLoop(rt: RunnerContext, queen: Queen, signal: AbortSignal): Promise<void> {
  const every = rt.joinIdleFlushMs;
  if (every <= 0) return;
  try {
    await seedJoinShards(rt, queen);
  } catch (err) {
    rt.report(err, { phase: 'flush' });
  }
  while (!signal.aborted) {
    await sleep(every, signal);
    if (signal.aborted) return;
    await flushJoinShards(rt, queen);
  }
}
