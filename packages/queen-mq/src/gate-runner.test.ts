import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, Stream, type GateStage, type RunHandle } from './index.js';
import { collectUntil, configureSource, cursorOf, push, sleep, stateRows } from '../test/helpers.js';

// The runner's gate path, driven through core's generic `.pipe(gateStage)`
// (the `.gate()` sugar arrives with @queen-mq/gate).

let b: TestBroker;
let queen: Queen;
const handles: RunHandle[] = [];
beforeAll(async () => {
  b = await startTestBroker();
  queen = new Queen({ url: b.url });
});
afterAll(async () => {
  await Promise.all(handles.map((h) => h.stop()));
  await queen?.close();
  await b?.stop();
});

const gate = (evaluate: GateStage['evaluate']): GateStage => ({ kind: 'gate', evaluate });

describe('gate stages in the runner', () => {
  it('S42 a budget deny acks the allowed prefix, keeps the lease, and the tail returns in order', async () => {
    const src = uniqueName('s42-src');
    const sink = uniqueName('s42-sink');
    const queryId = uniqueName('s42');
    await configureSource(b, src);
    const [p] = await push(b, src, Array.from({ length: 10 }, (_, i) => ({ n: i + 1 })));
    const h = await Stream.from(queen.queue(src))
      .pipe(
        gate((_req, ctx) => {
          ctx.state.remaining ??= 3;
          if (ctx.state.remaining < 1) return false;
          ctx.state.remaining -= 1;
          return true;
        }),
      )
      .to(queen.queue(sink))
      .run({ queryId, url: b.url, batchSize: 10, maxWaitMillis: 300 });
    handles.push(h);
    const got = await collectUntil(b, sink, (all) => all.length >= 3, 8000, 600);
    expect(got.map((m) => m.data.n)).toEqual([1, 2, 3]);
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.map((r) => [r.key, r.value])).toEqual([[p!.partition_id, { remaining: 0 }]]);
    expect(await cursorOf(b, `streams.${queryId}`, src)).toBe('3');
    expect(h.metrics().gateAllowsTotal).toBe(3);
    expect(h.metrics().gateDenialsTotal).toBeGreaterThanOrEqual(1);
    await h.stop();
    // after expiry a raw pop by the query's group gets n=4 first, then the rest in order
    const next = await eventually(async () => {
      const res = await b.http('GET', `/api/v1/pop/queue/${src}?batch=10&consumerGroup=streams.${queryId}`);
      return res.status === 200 ? res.body.messages : null;
    }, 8000, 200);
    expect(next.map((m: any) => m.data.n)).toEqual([4, 5, 6, 7, 8, 9, 10]);
    expect(next.every((m: any) => m.retryCount === 0)).toBe(true);
  });

  it('S43/S47 a first-message deny or a gate error sends no cycle at all', async () => {
    for (const [label, evaluate] of [
      ['deny', () => false],
      ['throw', () => {
        throw new Error('boom');
      }],
      ['yes', () => 'yes' as any],
    ] as const) {
      const src = uniqueName(`s43-${label}`);
      const sink = uniqueName('s43-sink');
      const queryId = uniqueName('s43');
      await configureSource(b, src);
      const [p] = await push(b, src, [{ n: 1 }, { n: 2 }, { n: 3 }]);
      const phases: string[] = [];
      const h = await Stream.from(queen.queue(src))
        .pipe(gate(evaluate as GateStage['evaluate']))
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, batchSize: 10, maxWaitMillis: 300, onError: (_e, info) => phases.push(info.phase) });
      handles.push(h);
      await sleep(1500);
      expect(h.metrics().cyclesTotal, label).toBe(0);
      expect(await stateRows(b, h.queryUuid, p!.partition_id), label).toEqual([]);
      expect(await cursorOf(b, `streams.${queryId}`, src), label).toBe('0');
      if (label === 'deny') expect(h.metrics().gateDenialsTotal).toBeGreaterThanOrEqual(1);
      else {
        expect(h.metrics().errorsTotal, label).toBeGreaterThanOrEqual(1);
        expect(phases, label).toContain('gate-eval');
      }
      await h.stop();
    }
  });
});
