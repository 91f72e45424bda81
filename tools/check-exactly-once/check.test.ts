import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireCluster, type Cluster } from '@queen-mq/testing';
import { checkSeed } from './check.js';
import type { VariantFilter } from './variant.js';

// A few fixed seeds of the randomized exactly-once checker (README.md beside
// this file), each pinned to one variant by its filter so the case always
// checks the same kind of window, time domain and faults.
//
// Some cases check a rule of issue 28 whose fix lands on another branch. A
// case lists the fixes it needs; until a fix is named in MERGED_FIXES its
// case runs as `it.fails`: it must still FAIL (the checker finds the bug),
// and once the fix is merged it turns red until the fix is added here, so
// the list cannot go stale and nothing is skipped.
type Fix = 'grace-admits' | 'gate-reassign' | 'event-time-dlq';
const MERGED_FIXES = new Set<Fix>([]);

interface Case {
  name: string;
  seed: number;
  filter: VariantFilter;
  needs?: Fix[];
}

const cases: Case[] = [
  // the idle flush against a push stamped before a boundary and committed after it; a runner SIGKILL and lost cycle answers
  { name: 'tumbling, processing time, grace 0, kill + lost answers', seed: 11, filter: { kinds: ['tumbling'], time: ['processing'], grace: [0], faults: ['kill', 'lost'] } },
  { name: 'cron expression in a time zone, processing time, broker restart', seed: 12, filter: { kinds: ['cron-expr'], time: ['processing'], grace: [0.5], faults: ['restart'] } },
  { name: 'sliding, event time, late records to a sink, stalls past the lease', seed: 13, filter: { kinds: ['sliding'], time: ['event'], grace: [0], onLate: ['sink'], badEventTime: false, faults: ['stall'] } },
  { name: 'session, event time, onLate include, kill', seed: 14, filter: { kinds: ['session'], time: ['event'], grace: [0], onLate: ['include'], badEventTime: false, faults: ['kill'] } },
  { name: 'gate, in-place mutation, kill', seed: 15, filter: { kinds: ['gate'], gateStyles: ['mutate'], faults: ['kill'] } },
  { name: 'cron unit, event time, grace 1 s admits out-of-order events', seed: 16, filter: { kinds: ['cron-unit'], time: ['event'], grace: [1], onLate: ['drop'], badEventTime: false, faults: [] }, needs: ['grace-admits'] },
  { name: 'gate, ctx.state reassigned', seed: 17, filter: { kinds: ['gate'], gateStyles: ['reassign'], faults: [] }, needs: ['gate-reassign'] },
  { name: 'tumbling, event time, unusable event times dead-lettered', seed: 18, filter: { kinds: ['tumbling'], time: ['event'], grace: [0], onLate: ['drop'], badEventTime: true, faults: [] }, needs: ['event-time-dlq'] },
];

let cluster: Cluster;
beforeAll(async () => {
  cluster = await acquireCluster();
});
afterAll(() => cluster?.release());

describe('exactly-once checker, fixed seeds', () => {
  for (const c of cases) {
    const pending = (c.needs ?? []).filter((f) => !MERGED_FIXES.has(f));
    const test = pending.length ? it.fails : it;
    test(`seed ${c.seed}: ${c.name}${pending.length ? ` (fails until ${pending.join(', ')} is merged)` : ''}`, async () => {
      const r = await checkSeed(c.seed, c.filter, cluster.adminUrl);
      expect(r.windowsChecked).toBeGreaterThan(0);
      expect(r.discrepancies, `${r.description}\nreplay: seed ${c.seed} with ${JSON.stringify(c.filter)}`).toEqual([]);
    }, 90_000);
  }
});
