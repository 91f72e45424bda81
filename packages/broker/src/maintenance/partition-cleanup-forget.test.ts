import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// A cleanup pass (PROTOCOL §3.9) deletes partitions; this broker's id cache
// (partitions.ts) then forgets exactly those, one lookup each. Forgetting by
// queue walked the whole cache once per queue of the pass (a pass deleting
// the partitions of 100 queues walked 25,000 cached entries 100 times).

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { partitionCleanupS: 1 } });
});
afterAll(async () => b?.stop());

const run = (tasks: string[]) => b.http('POST', '/api/v1/system/maintenance/run', { tasks });

describe('partition cleanup and the id cache', () => {
  it('a cleanup pass forgets the partitions it deleted without walking the cache', async () => {
    const gone = Array.from({ length: 40 }, () => uniqueName('gone'));
    const kept = uniqueName('kept');
    const items = [
      ...gone.flatMap((queue) => [0, 1, 2].map((p) => ({ queue, partition: `p${p}`, payload: p }))),
      ...Array.from({ length: 1500 }, (_, p) => ({ queue: kept, partition: `k${p}`, payload: p })),
    ];
    expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);
    for (const queue of gone) await b.http('POST', '/api/v1/configure', { queue, options: { retentionEnabled: true, retentionSeconds: 1 } });
    await sleep(2100);
    expect((await run(['retention'])).body.retention.messagesDropped).toBeGreaterThanOrEqual(120);
    await sleep(1100);

    // Count the cache entries anything walks during the cleanup pass.
    const cache = (b.ctx.partitions as any).cache;
    const entries = cache.entries.bind(cache);
    let walked = 0;
    cache.entries = function* () {
      for (const e of entries()) {
        walked += 1;
        yield e;
      }
    };
    const cachedBefore = b.ctx.partitions.cachedCount;
    let deleted = 0;
    try {
      deleted = (await run(['partitions'])).body.partitions.deleted;
    } finally {
      cache.entries = entries;
    }
    expect(walked).toBe(0);
    // The emptied partitions (and the empty ones configure made) are forgotten, the kept queue's 1,500 are not.
    expect(deleted).toBeGreaterThanOrEqual(120);
    expect(b.ctx.partitions.cachedCount).toBe(cachedBefore - deleted);
    expect([...cache.entries()].filter(([k]: [string]) => k.startsWith(`${kept}\u0000`))).toHaveLength(1500);

    // A push to a deleted partition creates it again.
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: gone[0], partition: 'p1', payload: 'again' }] })).status).toBe(201);
    const again = await b.http('GET', `/api/v1/pop/queue/${gone[0]}/partition/p1?wait=false`);
    expect(again.body.messages.map((m: any) => m.data)).toEqual(['again']);
  }, 60000);
});
