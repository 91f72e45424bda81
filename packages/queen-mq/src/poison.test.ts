import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream, type RunHandle, type WindowPlugin } from './index.js';
import { collectUntil, configureSource, cursorOf, push, stateRows, useStreamBroker, runDefaults } from '../test/helpers.js';

// Issue 13 item 5: a user function that throws on one message. The message is
// charged a failed delivery per attempt (POST /api/v1/ack status failed), is
// redelivered up to the source queue's retryLimit, then dead-lettered with the
// error and the query's name; the partition moves on and every other message
// is still processed exactly once.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

interface DlqRow {
  transactionId: string;
  consumerGroup: string;
  errorMessage: string;
  retryCount: number;
  data: any;
  offset: string;
}

async function dlqOf(queue: string): Promise<DlqRow[]> {
  const res = await b.http('GET', `/api/v1/dlq?queue=${encodeURIComponent(queue)}`);
  expect(res.status).toBe(200);
  return res.body.messages;
}

/** The runner's `message:dead-lettered` events. */
function deadLettered(h: RunHandle) {
  const events: { offset: string; deliveries: number; error: string }[] = [];
  h.on('message:dead-lettered', (e) => events.push({ offset: e.offset, deliveries: e.deliveries, error: e.error }));
  return events;
}

describe('poison messages in streams', () => {
  it('I13.5 a map that throws on one message: retryLimit+1 deliveries, then the DLQ; the other 9 reach the sink once each', async () => {
    const { src, sink, queryId } = await names('poison-map');
    await configureSource(b, src, { retryLimit: 2 });
    let poisonCalls = 0;
    const lines: string[] = [];
    const h = track(
      await Stream.from(queen.queue(src))
        .map((m) => {
          if (m.data.n === 3) {
            poisonCalls += 1;
            throw new Error('cannot parse order 3');
          }
          return { n: m.data.n };
        })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: (line) => lines.push(line) } }),
    );
    const events = deadLettered(h);
    await push(b, src, Array.from({ length: 10 }, (_, i) => ({ n: i + 1 })));

    const got = await collectUntil(b, sink, (all) => all.length >= 9, 15000, 800);
    expect(got.map((m) => m.data.n)).toEqual([1, 2, 4, 5, 6, 7, 8, 9, 10]);
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '10', 8000);
    // retryLimit 2: delivered three times, charged three failures, the third past the limit.
    expect(poisonCalls).toBe(3);
    const dlq = await dlqOf(src);
    expect(dlq).toHaveLength(1);
    expect(dlq[0]).toMatchObject({ consumerGroup: `streams.${queryId}`, data: { n: 3 }, offset: '3', retryCount: 3 });
    expect(dlq[0]!.errorMessage).toContain(`stream query "${queryId}"`);
    expect(dlq[0]!.errorMessage).toContain('.map() threw on the message at offset 3: cannot parse order 3');
    const m = h.metrics();
    expect(m.messagesDeadLetteredTotal).toBe(1);
    expect(m.poisonRetriesTotal).toBe(2);
    expect(m.messagesTotal).toBe(9);
    expect(events).toEqual([{ offset: '3', deliveries: 3, error: dlq[0]!.errorMessage }]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/dead-lettered message 3 .* after 3 deliveries/);
  });

  it('I13.5 the messages after a dead-lettered one follow at once, not when the lease expires', async () => {
    const { src, sink, queryId } = await names('poison-next');
    // A 60 s lease: the batch's lease must end with the dead letter, or the tail waits a minute.
    await configureSource(b, src, { retryLimit: 0, leaseTime: 60 });
    const h = track(
      await Stream.from(queen.queue(src))
        .map((m) => {
          if (m.data.n === 2) throw new Error('bad order 2');
          return { n: m.data.n };
        })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: () => undefined } }),
    );
    await push(b, src, Array.from({ length: 5 }, (_, i) => ({ n: i + 1 })));
    const got = await collectUntil(b, sink, (all) => all.length >= 4, 10000, 300);
    expect(got.map((m) => m.data.n)).toEqual([1, 3, 4, 5]);
    expect((await dlqOf(src)).map((r) => r.offset)).toEqual(['2']);
    expect(h.metrics()).toMatchObject({ messagesDeadLetteredTotal: 1, messagesTotal: 4 });
  });

  it('I13.5 a reducer extractor that throws: default retryLimit 3 (four deliveries), the window totals exclude only the poison message', async () => {
    const { src, sink, queryId } = await names('poison-agg');
    // The queue default (3), not the suite's 100.
    await configureSource(b, src, { retryLimit: 3 });
    let poisonCalls = 0;
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({
          count: () => 1,
          sum: (m) => {
            if (m.amount === 'bad') {
              poisonCalls += 1;
              throw new Error('amount is not a number');
            }
            return m.amount;
          },
        })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: () => undefined } }),
    );
    const inA = [5, 7, 'bad', 11, 13].map((amount, i) => ({ ts: `2026-01-05T10:00:0${i}Z`, amount }));
    const [p] = await push(b, src, [...inA, { ts: '2026-01-05T10:01:10Z', amount: 100 }]);

    const got = await collectUntil(b, sink, (all) => all.length >= 1, 15000, 800);
    expect(got.map((m) => m.data)).toEqual([{ count: 4, sum: 36 }]);
    expect(poisonCalls).toBe(4);
    const dlq = await dlqOf(src);
    expect(dlq.map((r) => [r.offset, r.data.amount, r.retryCount])).toEqual([['3', 'bad', 4]]);
    expect(dlq[0]!.errorMessage).toContain(`stream query "${queryId}"`);
    expect(dlq[0]!.errorMessage).toContain('.aggregate() threw on the message at offset 3');
    // The second window holds exactly the last message.
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.filter((r) => r.key !== '__wm__').map((r) => r.value.acc)).toEqual([{ count: 1, sum: 100 }]);
    expect(h.metrics().messagesDeadLetteredTotal).toBe(1);
    expect(await cursorOf(b, `streams.${queryId}`, src)).toBe('6');
  });

  it('I13.5 a gate that throws on one message: the allowed state counts every other message once; the poison one is dead-lettered', async () => {
    const { src, sink, queryId } = await names('poison-gate');
    await configureSource(b, src, { retryLimit: 1 });
    let poisonCalls = 0;
    const h = track(
      await Stream.from(queen.queue(src))
        .gate((m, ctx) => {
          if (m.data.n === 4) {
            poisonCalls += 1;
            throw new Error('limiter backend said no');
          }
          ctx.state.allowed = (ctx.state.allowed ?? 0) + 1;
          return true;
        })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: () => undefined } }),
    );
    const [p] = await push(b, src, Array.from({ length: 8 }, (_, i) => ({ n: i + 1 })));
    const got = await collectUntil(b, sink, (all) => all.length >= 7, 15000, 800);
    expect(got.map((m) => m.data.n)).toEqual([1, 2, 3, 5, 6, 7, 8]);
    expect(poisonCalls).toBe(2);
    expect((await stateRows(b, h.queryUuid, p!.partition_id)).map((r) => r.value)).toEqual([{ allowed: 7 }]);
    const dlq = await dlqOf(src);
    expect(dlq.map((r) => [r.offset, r.data.n])).toEqual([['4', 4]]);
    expect(dlq[0]!.errorMessage).toContain('gate threw on the message at offset 4: limiter backend said no');
    expect(h.metrics()).toMatchObject({ messagesDeadLetteredTotal: 1, poisonRetriesTotal: 1, messagesTotal: 7 });
  });
  it('I28.5 an eventTime that returns nothing for one message: dead-lettered for the group with the error text, never acked away; the others are counted in their windows', async () => {
    const { src, sink, queryId } = await names('place-no-ts');
    await configureSource(b, src, { retryLimit: 1 });
    const errors: { phase: string; offset?: string }[] = [];
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: () => undefined }, onError: (_e, info) => errors.push(info) }),
    );
    const events = deadLettered(h);
    const [p] = await push(b, src, [
      { ts: '2026-01-05T10:00:01Z', v: 1 },
      { ts: '2026-01-05T10:00:02Z', v: 2 },
      { v: 4 }, // no event time
      { ts: '2026-01-05T10:00:03Z', v: 8 },
      { ts: '2026-01-05T10:01:10Z', v: 100 }, // closes [10:00, 10:01)
    ]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 15000, 500);
    expect(got.map((m) => m.data)).toEqual([{ count: 3, sum: 11 }]);
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '5' || null, 8000);
    const dlq = await dlqOf(src);
    expect(dlq.map((r) => [r.offset, r.consumerGroup, r.data])).toEqual([['3', `streams.${queryId}`, { v: 4 }]]);
    expect(dlq[0]!.errorMessage).toBe(`stream query "${queryId}" (${h.queryUuid}): eventTime returned undefined for the message at offset 3; expected a Date, epoch ms or an ISO string`);
    // retryLimit 1: two deliveries, each reported once
    expect(errors).toEqual([
      { phase: 'window-apply', partitionId: p!.partition_id, offset: '3' },
      { phase: 'window-apply', partitionId: p!.partition_id, offset: '3' },
    ]);
    expect(events).toEqual([{ offset: '3', deliveries: 2, error: dlq[0]!.errorMessage }]);
    // the open window holds exactly the last message
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.filter((r) => r.key !== '__wm__').map((r) => r.value.acc)).toEqual([{ count: 1, sum: 100 }]);
    expect(h.metrics()).toMatchObject({ messagesDeadLetteredTotal: 1, poisonRetriesTotal: 1, messagesTotal: 4 });
  });

  it('I28.5 an eventTime that throws, a window assign that throws, a keyBy that throws before the window: each message dead-lettered with its error', async () => {
    const { src, sink, queryId } = await names('place-throws');
    await configureSource(b, src, { retryLimit: 0 });
    // A custom window that cannot place one instant.
    const minute: WindowPlugin = {
      kind: 'minute-but-7777',
      shape: { seconds: 60 },
      defaultIdleFlushMs: 0,
      assign: (ts) => {
        if (ts === 7777) throw new Error('no window for 7777');
        const start = Math.floor(ts / 60_000) * 60_000;
        return [{ start, end: start + 60_000 }];
      },
    };
    const h = track(
      await Stream.from(queen.queue(src))
        .keyBy((m) => {
          if (m.data.k === 'bad') throw new Error('no key');
          return 'k';
        })
        .window(minute, {
          eventTime: (m) => {
            if (m.data.t === 'throw') throw new Error('clock field is corrupt');
            return m.data.t;
          },
        })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: () => undefined } }),
    );
    await push(b, src, [
      { t: 1000, v: 1 },
      { t: 'throw', v: 2 },
      { t: 7777, v: 4 },
      { t: 2000, v: 8, k: 'bad' },
      { t: 3000, v: 16 },
      { t: 61_000, v: 32 }, // closes [0, 60 s)
    ]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 15000, 500);
    expect(got.map((m) => m.data)).toEqual([{ count: 2, sum: 17 }]);
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '6' || null, 8000);
    const dlq = (await dlqOf(src)).sort((x, y) => Number(x.offset) - Number(y.offset));
    expect(dlq.map((r) => [r.offset, r.consumerGroup])).toEqual([['2', `streams.${queryId}`], ['3', `streams.${queryId}`], ['4', `streams.${queryId}`]]);
    expect(dlq[0]!.errorMessage).toContain('eventTime threw on the message at offset 2: clock field is corrupt');
    expect(dlq[1]!.errorMessage).toContain('window "minute-but-7777" assign threw on the message at offset 3: no window for 7777');
    expect(dlq[2]!.errorMessage).toContain('.keyBy() threw on the message at offset 4: no key');
    expect(h.metrics()).toMatchObject({ messagesDeadLetteredTotal: 3, messagesTotal: 3 });
  });
});
