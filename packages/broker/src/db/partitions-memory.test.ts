import { randomUUID } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { Database } from './database.js';
import { PartitionDirectory } from './partitions.js';

// What a cached partition costs the broker's heap: the directory
// holds up to 50,000, and a broker that pushed to 150,000 partitions holds
// that many. Without PostgreSQL: a stand-in answers ensure_partitions_v1's
// rows as pg would, each string fresh.
//
// The bound: a key (`queue\0partition`, concatenated: 72 bytes here), a
// partition id (a 36-character uuid string: 56 bytes) and the ClockCache's
// share (a Map entry and two array slots) come to 0.23 KB; the entry was
// 0.38 KB when it also kept the names, the queue id and an object around
// them. 0.28 KB fails that shape and leaves room for noise.
const MAX_BYTES_PER_ENTRY = 280;
const ENTRIES = 20_000;

const fresh = (s: string) => Buffer.from(s).toString('utf8');
const database = {
  query: async (_text: string, [json]: [string]) => ({
    rows: (JSON.parse(json) as { queue: string; partition: string }[]).map((t) => ({
      queue_name: fresh(t.queue),
      partition_name: fresh(t.partition),
      partition_id: fresh(randomUUID()),
      queue_id: fresh(randomUUID()),
    })),
  }),
} as unknown as Database;

describe('partition directory: memory', () => {
  it(`a cached partition costs less than ${MAX_BYTES_PER_ENTRY} bytes of heap`, async () => {
    setFlagsFromString('--expose_gc');
    const gc = runInNewContext('gc') as () => void;
    const heapUsed = () => {
      gc();
      gc();
      return process.memoryUsage().heapUsed;
    };
    const dir = new PartitionDirectory(database);
    const targets = Array.from({ length: ENTRIES }, (_, i) => ({ queue: `queue-${i % 2000}`, partition: `partition-${i}` }));
    const before = heapUsed();
    for (let i = 0; i < ENTRIES; i += 500) await dir.ensure(targets.slice(i, i + 500));
    const perEntry = (heapUsed() - before) / ENTRIES;
    expect(dir.cachedCount).toBe(ENTRIES);
    console.log(`${ENTRIES} cached partitions: ${perEntry.toFixed(0)} bytes of heap each`);
    expect(perEntry).toBeLessThan(MAX_BYTES_PER_ENTRY);
  });
});
