import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireCluster, type Cluster } from '@queen-mq/testing';
import { checkSeed } from './check.js';
import type { VariantFilter } from './variant.js';

// A few fixed seeds of the randomized exactly-once checker (README.md beside
// this file), each pinned to one variant by its filter so the case always
// checks the same kind of window, time domain and faults.
//
// Some cases check a rule of issue 28 whose fix lands on another branch. A
// case names the fixes it needs and the discrepancies their absence causes.
// Until every fix it needs is listed in MERGED_FIXES, the case asserts that
// the checker FINDS those discrepancies (and no other kind); once the fixes
// are merged that assertion turns red until they are added here, and from
// then on the case asserts no discrepancy at all. Nothing is skipped, and
// the list cannot go stale.
type Fix = 'grace-admits' | 'gate-reassign' | 'event-time-dlq';
const MERGED_FIXES = new Set<Fix>(['gate-reassign', 'event-time-dlq']);

interface Case {
  name: string;
  seed: number;
  filter: VariantFilter;
  needs?: { fixes: Fix[]; symptoms: string[] };
}

const cases: Case[] = [
  // the idle flush against a push stamped before a boundary and committed after it; a runner SIGKILL, lost cycle answers
  { name: 'tumbling, processing time, grace 0, kill + lost answers', seed: 11, filter: { kinds: ['tumbling'], time: ['processing'], grace: [0], faults: ['kill', 'lost'] } },
  { name: 'cron expression in a time zone, processing time, broker restart', seed: 12, filter: { kinds: ['cron-expr'], time: ['processing'], grace: [0.5], faults: ['restart'] } },
  { name: 'sliding, event time, late records to a sink, a cycle stalled past the lease', seed: 13, filter: { kinds: ['sliding'], time: ['event'], grace: [0], onLate: ['sink'], badEventTime: false, faults: ['stall'] } },
  { name: 'session, event time, onLate include, lost answers', seed: 14, filter: { kinds: ['session'], time: ['event'], grace: [0], onLate: ['include'], badEventTime: false, faults: ['lost'] } },
  {
    name: 'tumbling, event time, grace 1 s admits out-of-order events, unusable event times dead-lettered',
    seed: 16,
    filter: { kinds: ['tumbling'], time: ['event'], grace: [1], onLate: ['drop'], badEventTime: true, faults: [] },
    needs: { fixes: ['grace-admits', 'event-time-dlq'], symptoms: ['window emitted with a wrong result', 'window missing on the sink', 'unusable event time not dead-lettered'] },
  },
  {
    name: 'gate, ctx.state reassigned',
    seed: 17,
    filter: { kinds: ['gate'], gateStyles: ['reassign'], faults: [] },
    needs: { fixes: ['gate-reassign'], symptoms: ['gate allowed more than its budget', 'gate budget row wrong', 'gate output out of order or misnumbered'] },
  },
];

let cluster: Cluster;
beforeAll(async () => {
  cluster = await acquireCluster();
});
afterAll(() => cluster?.release());

describe('exactly-once checker, fixed seeds', () => {
  for (const c of cases) {
    const pending = (c.needs?.fixes ?? []).filter((f) => !MERGED_FIXES.has(f));
    const title = pending.length ? `seed ${c.seed}: ${c.name}: finds the bugs of ${pending.join(', ')} (not merged yet)` : `seed ${c.seed}: ${c.name}`;
    it(title, async () => {
      const r = await checkSeed(c.seed, c.filter, cluster.adminUrl);
      const report = `${r.description}\nreplay: seed ${c.seed} with ${JSON.stringify(c.filter)}\n${JSON.stringify(r.discrepancies, null, 1).slice(0, 3000)}`;
      expect(r.windowsChecked).toBeGreaterThan(0);
      if (!pending.length) {
        expect(r.discrepancies, report).toEqual([]);
        return;
      }
      expect(r.discrepancies.length, report).toBeGreaterThan(0);
      for (const d of r.discrepancies) expect(c.needs!.symptoms, report).toContain(d.what);
    }, 90_000);
  }
});
