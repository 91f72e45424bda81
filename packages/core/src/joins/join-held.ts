import type { RunnerContext } from '../context/runner-context.js';
import type { StateOp } from '../context/wire.js';
import { JOIN_CLOCK_KEY } from '../plan/keys.js';
import { joinExpiresAt } from './join-fold.js';

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
