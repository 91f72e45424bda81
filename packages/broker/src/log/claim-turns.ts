import type { BrokerContext } from '../context/context.js';

/**
 * Where each (queue, consumer group) stands in the round a fair wildcard pop
 * makes of its pending partitions (queen.log_pop_v4): `after`, the partition
 * the round last reached, and `again`, the partitions owed more turns for
 * their weight (partitionWeights: a partition of weight 3 is served three
 * pops in a row, each a batch). Kept in the broker, not in PostgreSQL: a
 * claim would otherwise write a row that every push to the partition and
 * every other pop of the group waits for. Each broker keeps its own; one
 * that restarts begins the round at the lowest partition id again.
 */
interface Turns {
  after: string | null;
  /** Turns still owed, and how many pops in a row were offered the partition and did not claim it. */
  again: Map<string, { left: number; missed: number }>;
}

/** The turn a wildcard pop passes to the pop statement. */
interface ClaimTurn {
  after: string | null;
  again: string[] | null;
}

/** Lines kept at most; past it the one used longest ago is forgotten (its next pop starts a round afresh). */
const MAX_LINES = 10_000;
/** Partitions owed turns offered to one pop at most. */
const MAX_AGAIN = 16;
/** Offered this many pops in a row without being claimed (drained, or held by another consumer that long): no longer owed. */
const MAX_MISSED = 8;

const linesOf = new WeakMap<BrokerContext, Map<string, Turns>>();

function lines(ctx: BrokerContext): Map<string, Turns> {
  let m = linesOf.get(ctx);
  if (!m) linesOf.set(ctx, (m = new Map()));
  return m;
}

const keyOf = (queue: string, group: string) => `${queue}\u0000${group}`;

/** The turn a wildcard pop of the line passes to the pop statement. */
export function claimTurn(ctx: BrokerContext, queue: string, group: string): ClaimTurn {
  const t = lines(ctx).get(keyOf(queue, group));
  if (!t) return { after: null, again: null };
  return { after: t.after, again: t.again.size === 0 ? null : [...t.again.keys()].slice(0, MAX_AGAIN) };
}

/**
 * Whether `id` lies further on than `current` in the round that the pop
 * offered `from` made (ids after `from`, then from the start). Pops in flight
 * at once answer in any order; without this a slow answer would move the
 * round back and serve again the partitions a faster one had just passed.
 * Ids compare as PostgreSQL compares uuids: their text in lower case.
 */
function aheadInRound(id: string, current: string | null, from: string | null): boolean {
  if (current === null || current === from) return true;
  const place = (x: string) => (from === null || x > from ? `0${x}` : `1${x}`);
  return place(id) > place(current);
}

/**
 * A wildcard pop of the line that was offered `turn` claimed `claims` (its
 * messages' partitions with their weights, in claim order): a partition
 * owed turns used one; any other moves the round on to it and, weighing
 * more than 1, is owed weight - 1 turns more.
 */
export function noteClaim(ctx: BrokerContext, queue: string, group: string, turn: ClaimTurn, claims: { partition_id: string; weight: number | null }[]): void {
  const m = lines(ctx);
  const key = keyOf(queue, group);
  const t = m.get(key) ?? { after: null, again: new Map() };
  const claimed = new Set<string>();
  let previous: string | undefined;
  for (const c of claims) {
    // A pop's messages come partition by partition: one look per partition, not per message.
    if (c.partition_id === previous) continue;
    previous = c.partition_id;
    if (claimed.has(c.partition_id)) continue;
    claimed.add(c.partition_id);
    const owed = t.again.get(c.partition_id);
    if (owed) {
      if (owed.left <= 1) t.again.delete(c.partition_id);
      else (owed.left -= 1), (owed.missed = 0);
    } else {
      if (aheadInRound(c.partition_id, t.after, turn.after)) t.after = c.partition_id;
      if ((c.weight ?? 1) > 1) t.again.set(c.partition_id, { left: c.weight! - 1, missed: 0 });
    }
  }
  for (const id of turn.again ?? []) {
    const owed = t.again.get(id);
    if (owed && !claimed.has(id) && ++owed.missed >= MAX_MISSED) t.again.delete(id);
  }
  // Re-inserted so the map's order is least recently used first.
  m.delete(key);
  m.set(key, t);
  if (m.size > MAX_LINES) m.delete(m.keys().next().value!);
}
