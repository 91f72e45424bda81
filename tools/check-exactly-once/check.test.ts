import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireCluster, type Cluster } from '@queen-mq/testing';
import { checkSeed } from './check.js';
import type { VariantFilter } from './variant.js';

// A few fixed seeds of the randomized exactly-once checker (README.md beside
// this file), each pinned to one variant by its filter so the case always
// checks the same kind of window, time domain and faults.
// Cases 16 and 17 found the missing fixes of issue 28 (grace that admits,
// unusable event times dead-lettered, gate state reassignment) before they
// were merged; they now hold the rules.

interface Case {
  name: string;
  seed: number;
  filter: VariantFilter;
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
  },
  {
    name: 'gate, ctx.state reassigned',
    seed: 17,
    filter: { kinds: ['gate'], gateStyles: ['reassign'], faults: [] },
  },
];

let cluster: Cluster;
beforeAll(async () => {
  cluster = await acquireCluster();
});
afterAll(() => cluster?.release());

describe('exactly-once checker, fixed seeds', () => {
  for (const c of cases) {
    it(`seed ${c.seed}: ${c.name}`, async () => {
      const r = await checkSeed(c.seed, c.filter, cluster.adminUrl);
      const report = `${r.description}\nreplay: seed ${c.seed} with ${JSON.stringify(c.filter)}\n${JSON.stringify(r.discrepancies, null, 1).slice(0, 3000)}`;
      expect(r.windowsChecked).toBeGreaterThan(0);
      expect(r.discrepancies, report).toEqual([]);
    }, 90_000);
  }
});
