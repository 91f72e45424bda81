import { describe, expect, it } from 'vitest';
import { Stream } from '../stream.js';
import { MERGING_END_RULE, type MergedWindow, type WindowBounds, type WindowPlugin } from '../plan/plugins.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateRow } from '../context/wire.js';
import { foldWindowBatch, prepareWindowBatch, batchClock } from './window-batch.js';
import { SEP } from '../plan/keys.js';

// The plugin interface's explicit parts: a merging window says so (its end
// rule) and says which windows it merged; tags are derived or checked.

const sink = { kind: 'queue', shape: { queue: 'sink' }, sinkQueue: 'sink', toPushItems: (v: unknown) => [{ queue: 'sink', payload: v }] };
const PID = '0195f0a0-0000-7000-8000-000000000003';
const T = Date.parse('2026-01-05T10:00:00.000Z');

function msg(offset: number, t: number): SourceMessage {
  return {
    id: `id-${offset}`, transactionId: `tx-${offset}`, traceId: null, data: { t }, producerSub: null,
    createdAt: '2026-01-05T12:00:00.000000Z', partitionId: PID, partition: 'Default', queue: 'src',
    leaseId: 'lease', consumerGroup: 'g', offset: String(offset), retryCount: 0,
  };
}

const fixed = (over: Partial<Record<string, unknown>> = {}): WindowPlugin =>
  ({ kind: 'wp-fixed', shape: { s: 1 }, tag: 'wp-fixed:1', defaultIdleFlushMs: 0, assign: (t: number) => [{ start: t, end: t + 1000 }], ...over }) as WindowPlugin;

describe('window plugin interface', () => {
  it('a merge() without the merging declaration is refused, not switched on silently', () => {
    const undeclared = fixed({ merge: (ws: WindowBounds[]) => ws });
    expect(() => Stream.from({ name: 'src' }).window(undeclared)).toThrow(/has a merge\(\) but does not declare merging/);
    expect(() => Stream.from({ name: 'src' }).window(fixed({ merging: MERGING_END_RULE }))).toThrow(/declares merging but has no merge\(\)/);
    expect(() => Stream.from({ name: 'src' }).window(fixed({ merging: 'exclusive', merge: () => [] }))).toThrow(/merging must be "inclusive-ends-one-open-row-per-key"/);
  });

  it('core folds by the windows merge() says it merged, not by containment', () => {
    // Fixed-length visits: an event inside an open visit joins it WITHOUT
    // extending it (its own window [t, t+2 s] is not contained in the answer).
    const visits: WindowPlugin = {
      kind: 'wp-visit', shape: { s: 2 }, tag: 'wp-visit:2', defaultIdleFlushMs: 0,
      assign: (t) => [{ start: t, end: t + 2000 }],
      merging: MERGING_END_RULE,
      merge(ws: readonly WindowBounds[]): MergedWindow[] {
        const out: { start: number; end: number; merged: number[] }[] = [];
        for (const i of ws.map((_, i) => i).sort((a, b) => ws[a]!.start - ws[b]!.start)) {
          const last = out[out.length - 1];
          if (last && ws[i]!.start <= last.end) last.merged.push(i);
          else out.push({ start: ws[i]!.start, end: ws[i]!.end, merged: [i] });
        }
        return out;
      },
    };
    const plan = Stream.from({ name: 'src' }).window(visits, { eventTime: (m: any) => m.data.t }).aggregate({ count: () => 1 }).to(sink).compile();
    const prepared = prepareWindowBatch(plan, [msg(1, T), msg(2, T + 1500)]);
    const stored = new Map<string, StateRow>();
    const fold = foldWindowBatch(plan, prepared, stored, [], batchClock(plan, prepared, stored));
    const open = fold.stateOps.find((o) => o.key === `wp-visit:2${SEP}open${SEP}${PID}`);
    expect(open).toMatchObject({ type: 'upsert', value: { acc: { count: 2 }, sessionStart: T, windowEnd: T + 2000 } });
    expect((open as { value: { earlier?: unknown } }).value.earlier).toBeUndefined();
  });

  it('tag: derived from kind and shape when omitted; a tag shared by another kind or shape is refused', () => {
    const untagged = fixed({ tag: undefined, kind: 'wp-untagged' });
    const a = Stream.from({ name: 'src' }).window(untagged).aggregate({ count: () => 1 }).to(sink).compile();
    expect(a.window!.tag).toMatch(/^wp-untagged:[0-9a-f]{16}$/);
    const other = fixed({ tag: undefined, kind: 'wp-untagged', shape: { s: 2 } });
    expect(Stream.from({ name: 'src' }).window(other).aggregate({ count: () => 1 }).to(sink).compile().window!.tag).not.toBe(a.window!.tag);
    // the same kind and shape may reuse its tag (every builder call makes a new plugin object)
    expect(() => Stream.from({ name: 'src' }).window(fixed())).not.toThrow();
    expect(() => Stream.from({ name: 'src' }).window(fixed())).not.toThrow();
    expect(() => Stream.from({ name: 'src' }).window(fixed({ shape: { s: 60 } }))).toThrow(/tag "wp-fixed:1" is already used by another window/);
    expect(() => Stream.from({ name: 'src' }).window(fixed({ kind: 'wp-impostor' }))).toThrow(/already used/);
    expect(() => Stream.from({ name: 'src' }).window(fixed({ tag: `a${SEP}b` }))).toThrow(/without U\+001F/);
    expect(() => Stream.from({ name: 'src' }).window(fixed({ tag: '__wm' }))).toThrow(/does not start with "__"/);
  });

  it('the tag does not enter the config hash (stored state of existing windows keeps its hash)', () => {
    const h = (tag: string | undefined) => Stream.from({ name: 'src' }).window(fixed({ kind: 'wp-hash', tag })).aggregate({ count: () => 1 }).to(sink).compile().configHash;
    expect(h(undefined)).toBe(h('wp-hash:given'));
  });
});
