import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen } from '@queen-mq/client';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { StreamsApi } from './state-api.js';

// state/get answers a page at a time (PROTOCOL §7.5, `next_after`); the
// runner's reads — the whole-partition read of a cycle, the idle flush's read
// of every open window — must see every row, not the first page.

let b: TestBroker;
let queen: Queen;
beforeAll(async () => {
  b = await startTestBroker();
  queen = new Queen({ url: b.url });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

describe('StreamsApi.stateGet', () => {
  it('follows next_after: 5 rows read with pages of 2 come back whole, in key order', async () => {
    const api = new StreamsApi(queen);
    const { query_id } = await api.register({ name: uniqueName('paged'), source_queue: uniqueName('paged-src'), config_hash: 'h' });
    const partition_id = randomUUID();
    const keys = ['k1', 'k2', 'k3', 'k4', 'k5'];
    const res = await api.cycle({ query_id, partition_id, state_ops: keys.map((key) => ({ type: 'upsert', key, value: { key } })), push_items: [], ack: null });
    expect(res.success).toBe(true);
    const rows = await api.stateGet({ query_id, partition_id, limit: 2 });
    expect(rows.map((r) => r.key)).toEqual(keys);
    expect((await api.stateGet({ query_id, partition_id, key_prefix: 'k', limit: 4 })).map((r) => r.key)).toEqual(keys);
  });
});
