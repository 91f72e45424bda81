// The join's reference model, from the STORED messages of both queues, in
// the words of the join's documentation and sharing no code with
// packages/core:
//   - a record's time is its payload's event time (`ts`), or its createdAt;
//   - per partition and per queue, in offset order, a record more than the
//     grace behind the greatest time before it on its own queue is late: it
//     pairs with nothing and is not held;
//   - every couple (left, right) of records that are not late, of one
//     partition name, with equal keys and times at most `within` apart, is
//     one output;
//   - a left join also outputs (left, null) for a left record with no such
//     couple once the right queue's greatest time, less the grace, is past
//     its time + within;
//   - a record stays held while the other queue's greatest time, less the
//     grace, is not past its time + within;
//   - in processing time the run ends with both queues quiet and the
//     broker's clock past every record's time + within + grace (the check
//     waits for it): then every bound has passed, on the clock if not on the
//     other queue's records, so a left join outputs every left record with no
//     couple, and nothing is held.
import type { Variant } from './variant.js';

export interface JoinStored {
  partition: string;
  offset: string;
  createdAtMs: number;
  data: { id: string; k: string; ts?: number };
}

export interface JoinModel {
  /** `leftId|rightId` or `leftId|null`, sorted (a multiset: a record stored twice counts twice). */
  outputs: string[];
  /** Per partition, `left:<id>` / `right:<id>` of the records still held, sorted. */
  held: Map<string, string[]>;
  records: number;
}

const byOffset = (a: JoinStored, b: JoinStored) => (BigInt(a.offset) < BigInt(b.offset) ? -1 : BigInt(a.offset) > BigInt(b.offset) ? 1 : 0);

export function joinModel(v: Variant, left: JoinStored[], right: JoinStored[]): JoinModel {
  const graceMs = v.graceS * 1000;
  const within = v.withinMs!;
  const time = (m: JoinStored) => (v.time === 'event' ? m.data.ts! : m.createdAtMs);
  const onTime = (list: JoinStored[]) => {
    let max = -Infinity;
    const kept: JoinStored[] = [];
    for (const m of [...list].sort(byOffset)) {
      if (time(m) < max - graceMs) continue;
      max = Math.max(max, time(m));
      kept.push(m);
    }
    return { kept, max: kept.length ? max : null };
  };
  const partitions = new Set([...left, ...right].map((m) => m.partition));
  const outputs: string[] = [];
  const held = new Map<string, string[]>();
  for (const p of partitions) {
    const L = onTime(left.filter((m) => m.partition === p));
    const R = onTime(right.filter((m) => m.partition === p));
    const passed = (t: number, otherMax: number | null) => v.time === 'processing' || (otherMax !== null && otherMax - graceMs > t + within);
    const h: string[] = [];
    for (const l of L.kept) {
      const matches = R.kept.filter((r) => r.data.k === l.data.k && Math.abs(time(l) - time(r)) <= within);
      for (const r of matches) outputs.push(`${l.data.id}|${r.data.id}`);
      if (v.joinType === 'left' && matches.length === 0 && passed(time(l), R.max)) outputs.push(`${l.data.id}|null`);
      if (!passed(time(l), R.max)) h.push(`left:${l.data.id}`);
    }
    for (const r of R.kept) if (!passed(time(r), L.max)) h.push(`right:${r.data.id}`);
    held.set(p, h.sort());
  }
  return { outputs: outputs.sort(), held, records: left.length + right.length };
}
