import type { RunnerContext } from '../context/runner-context.js';

/**
 * Before a commit on a join shard: watch it with its expiry unknown, so a
 * commit whose answer is lost (it may have committed records) still leaves
 * the shard to the idle flush, which then reads its `__join__` row. A commit
 * that answers replaces the entry (noteJoinHeld).
 */
export function watchJoinShard(rt: RunnerContext, shard: string, partition: string): void {
  if (rt.joinIdleFlushMs > 0) rt.joinHeld.set(shard, { partition });
}

/**
 * After a commit on a join shard: whether the join's idle flush watches it,
 * and from when (the committed fold's `expiresAt`). A shard holding nothing
 * leaves the watch.
 */
export function noteJoinHeld(rt: RunnerContext, shard: string, partition: string, expiresAt: number | null): void {
  if (rt.joinIdleFlushMs <= 0) return;
  if (expiresAt === null) rt.joinHeld.delete(shard);
  else rt.joinHeld.set(shard, { partition, expiresAt });
}
