import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { cursorOf, push, stateRows, useStreamBroker, runDefaults } from '../test/helpers.js';

// Issue 13 item 11: a foreach effect runs once per emit in a healthy process.
// A VERSION_CONFLICT makes the runner re-read state and recompute the batch;
// the effects that already ran for that batch must not run again.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

describe('foreach under VERSION_CONFLICT', () => {
  it('I13.11 a cycle recomputed after a VERSION_CONFLICT does not rerun the effects of its batch: 3 messages, 3 effect calls', async () => {
    const { src, queryId } = await names('fe-once');
    const effects: number[] = [];
    let conflicting: Promise<void> | undefined;
    const h = track(
      await Stream.from(queen.queue(src))
        .gate((_m, ctx) => {
          ctx.state.allowed = (ctx.state.allowed ?? 0) + 1;
          return true;
        })
        .foreach(async (v: any, ctx) => {
          effects.push(v.n);
          // The first effect call: another writer moves the gate's state row
          // under the cycle in flight, so its commit answers VERSION_CONFLICT.
          conflicting ??= (async () => {
            const res = await b.http('POST', '/streams/v1/cycle', {
              query_id: h.queryUuid,
              partition_id: ctx.partitionId,
              // The gate's state key is the source partition id (no keyBy).
              state_ops: [{ type: 'upsert', key: ctx.partitionId, value: { allowed: 100 } }],
              push_items: [],
              ack: null,
            });
            expect(res.body).toMatchObject({ success: true, state_ops_applied: 1 });
          })();
          await conflicting;
        })
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const partitionId = p!.partition_id;

    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '3', 8000);
    // The recomputed cycle read the conflicting row: it did recompute, and committed once.
    expect((await stateRows(b, h.queryUuid, partitionId)).map((r) => r.value)).toEqual([{ allowed: 103 }]);
    expect(effects).toEqual([1, 2, 3]);
    expect(h.metrics()).toMatchObject({ cyclesTotal: 1, messagesTotal: 3, errorsTotal: 0 });
  });
});
