import type { RunnerContext } from '../context/runner-context.js';
import type { StateOp } from '../context/wire.js';
import { JOIN_CLOCK_KEY } from '../plan/keys.js';
import { joinExpiresAt } from './join-fold.js';

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
 * and from when (the `__join__` row the commit wrote says when its first
 * held record may leave). A shard holding nothing leaves the watch.
 */
export function noteJoinHeld(rt: RunnerContext, shard: string, partition: string, stateOps: readonly StateOp[]): void {
  if (rt.joinIdleFlushMs <= 0) return;
  const options = rt.plan.join!.options;
  const clock = stateOps.find((op) => op.key === JOIN_CLOCK_KEY);
  const expiresAt = clock && clock.type === 'upsert' ? joinExpiresAt(options, clock.value) : undefined;
  if (expiresAt === null) rt.joinHeld.delete(shard);
  else rt.joinHeld.set(shard, { partition, ...(expiresAt !== undefined ? { expiresAt } : {}) });
}
