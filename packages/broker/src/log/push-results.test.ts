import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';
import { pushResultOf } from '@queen-mq/protocol';

// A push result has one shape (PROTOCOL §5.3; a cycle's push_results, §7.4):
// pushResultOf shapes it for every route, and raw SQL callers of the cycle
// function get it from queen_streams.push_results_v1 (migration 008). Random
// allocator answers go through both; the two must agree to the letter.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const uuid = (r: () => number) =>
  '00000000-0000-7000-8000-000000000000'.replace(/0/g, () => Math.floor(r() * 16).toString(16));

describe('push results: one shape in TypeScript and SQL', () => {
  it('pushResultOf and queen_streams.push_results_v1 answer the same results for random allocator answers', async () => {
    const random = rng(20261203);
    for (let round = 0; round < 40; round++) {
      const n = Math.floor(random() * 12); // 0 items included
      const items = Array.from({ length: n }, () => ({
        queue: `q${Math.floor(random() * 3)}`,
        ...(random() < 0.5 ? { transactionId: `t-${Math.floor(random() * 5)}` } : {}),
        ...(random() < 0.4 ? { traceId: uuid(random) } : {}),
      }));
      const pids = items.map(() => uuid(random));
      const answer = {
        status: items.map(() => (random() < 0.7 ? 'queued' : 'duplicate') as 'queued' | 'duplicate'),
        message_id: items.map(() => uuid(random)),
        offset: items.map(() => String(1 + Math.floor(random() * 1e6))),
      };
      const ts = answer.status.map((status, i) => pushResultOf(i, items[i]!, pids[i]!, status, answer.message_id[i]!, answer.offset[i]!));
      const { rows } = await b.sql.query(
        'select queen_streams.push_results_v1($1::jsonb, $2::uuid[], $3::text[], $4::text[], $5::jsonb[]) as r',
        [
          JSON.stringify(answer),
          pids,
          items.map((i) => i.queue),
          items.map((i) => i.transactionId ?? null),
          items.map((i) => (i.traceId === undefined ? null : JSON.stringify(i.traceId))),
        ],
      );
      expect(rows[0].r, JSON.stringify({ items, answer })).toEqual(ts);
    }
  });
});
