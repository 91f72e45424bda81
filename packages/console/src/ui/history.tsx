import type { HistoryPoint, HistoryRange, HistoryStream } from '@queen-mq/protocol';
import { useState } from 'preact/hooks';
import { call } from './api.js';
import { Chart, COLORS, perStep, RangePicker, type Line } from './charts.js';
import { duration, ErrorBox, Section, time, usePoll } from './components.js';

// The history's charts: the overview, a queue's and a stream query's, each
// over the range picked (the broker's history routes; docs/operations.md).

const REFRESH_MS = 15000;

const col = <P, K extends keyof P>(points: P[], key: K) => points.map((p) => Number(p[key]));
const total = (values: number[]) => values.reduce((s, v) => s + v, 0);

function throughput(points: HistoryPoint[]): Line[] {
  return [
    { label: 'pushed', values: col(points, 'pushed'), color: COLORS[0]! },
    { label: 'popped', values: col(points, 'popped'), color: COLORS[2]! },
    { label: 'acked', values: col(points, 'acked'), color: COLORS[1]! },
    { label: 'failed', values: col(points, 'failed'), color: COLORS[3]! },
    { label: 'dead-lettered', values: col(points, 'deadLettered'), color: COLORS[4]! },
  ];
}

/** Sums of the range's counts, as a line under the charts (the numbers the charts plot). */
function Totals({ points, id }: { points: HistoryPoint[]; id: string }) {
  return (
    <p class="muted" data-testid={id}>
      In this range: pushed <b data-total="pushed">{total(col(points, 'pushed'))}</b>, popped <b data-total="popped">{total(col(points, 'popped'))}</b>, acked{' '}
      <b data-total="acked">{total(col(points, 'acked'))}</b>, failed <b data-total="failed">{total(col(points, 'failed'))}</b>, dead-lettered{' '}
      <b data-total="deadLettered">{total(col(points, 'deadLettered'))}</b>.
    </p>
  );
}

export function OverviewPage() {
  const [range, setRange] = useState<HistoryRange>('1h');
  const { data, error } = usePoll(() => call('historyOverview', { query: { range } }), [range], REFRESH_MS);
  const times = data?.points.map((p) => p.t) ?? [];
  return (
    <>
      <h2>Overview</h2>
      <RangePicker range={range} onChange={setRange} />
      <ErrorBox error={error} />
      {data ? (
        <>
          <Chart id="overview-throughput" title={`Messages ${perStep[range]}, every queue`} times={times} lines={throughput(data.points)} />
          <Chart
            id="overview-lag"
            title="Lag (messages not acked, every consumer group) and DLQ entries"
            times={times}
            lines={[
              { label: 'lag', values: col(data.points, 'lag'), color: COLORS[5]! },
              { label: 'DLQ', values: col(data.points, 'dlq'), color: COLORS[4]! },
            ]}
          />
          <Totals points={data.points} id="overview-totals" />
        </>
      ) : null}
    </>
  );
}

export function QueueHistory({ name }: { name: string }) {
  const [range, setRange] = useState<HistoryRange>('1h');
  const { data, error } = usePoll(() => call('historyQueue', { params: { queue: name }, query: { range } }), [name, range], REFRESH_MS);
  const times = data?.points.map((p) => p.t) ?? [];
  return (
    <Section title="History">
      <RangePicker range={range} onChange={setRange} />
      <ErrorBox error={error} />
      {data ? (
        <>
          <Chart id="queue-throughput" title={`Messages ${perStep[range]}`} times={times} lines={throughput(data.points)} />
          <Chart
            id="queue-lag"
            title="Lag per consumer group, and the queue's depth"
            times={times}
            lines={[
              { label: 'depth', values: col(data.points, 'lag'), color: COLORS[6]! },
              ...data.groups.map((g, i) => ({ label: g.group, values: col(g.points, 'lag'), color: COLORS[i % COLORS.length]! })),
            ]}
          />
          <Chart
            id="queue-dlq"
            title={`DLQ: entries, and messages dead-lettered ${perStep[range]}`}
            times={times}
            lines={[
              { label: 'DLQ entries', values: col(data.points, 'dlq'), color: COLORS[4]! },
              { label: 'dead-lettered', values: col(data.points, 'deadLettered'), color: COLORS[3]! },
            ]}
          />
          <Totals points={data.points} id="queue-totals" />
        </>
      ) : null}
    </Section>
  );
}

/**
 * Event time: per point, how many seconds the watermark is behind the
 * point's end (now, for the current one). A point where no cycle moved it carries the one before
 * forward; null before the first point that has one.
 */
function watermarkBehind(points: HistoryStream['points'], stepS: number): (number | null)[] {
  let mark: number | null = null;
  return points.map((p) => {
    if (p.watermark !== null) mark = Math.max(mark ?? p.watermark, p.watermark);
    const end = Math.min(Date.parse(p.t) + stepS * 1000, Date.now());
    return mark === null ? null : Math.max(0, Math.round((end - mark) / 1000));
  });
}

export function StreamHistory({ name }: { name: string }) {
  const [range, setRange] = useState<HistoryRange>('1h');
  const { data, error } = usePoll(() => call('historyStream', { params: { name }, query: { range } }), [name, range], REFRESH_MS);
  const times = data?.points.map((p) => p.t) ?? [];
  const last = data?.points.reduce<string | null>((m, p) => (p.last_cycle_at && (!m || p.last_cycle_at > m) ? p.last_cycle_at : m), null) ?? null;
  const pts = data?.points ?? [];
  const marks = pts.map((p) => p.watermark).filter((w): w is number => w !== null);
  const watermark = marks.length ? Math.max(...marks) : null;
  return (
    <Section title="History">
      <RangePicker range={range} onChange={setRange} />
      <ErrorBox error={error} />
      {data ? (
        <>
          <p data-testid="stream-idle">
            Last commit: <b>{time(last)}</b>
            {last ? <span class="muted"> ({duration((Date.now() - Date.parse(last)) / 1000)} ago)</span> : <span class="muted"> (none in this range)</span>}
            {'. '}Idle flushes in this range: <b>{total(col(pts, 'flushes'))}</b>; late events: <b>{total(col(pts, 'late'))}</b>; errors: <b>{total(col(pts, 'errors'))}</b>.
            {watermark !== null ? (
              <>
                {' '}Watermark: <b data-watermark={watermark}>{time(new Date(watermark).toISOString())}</b>.
              </>
            ) : null}
          </p>
          <Chart
            id="stream-flow"
            title={`Messages in, emits and late events ${perStep[range]}`}
            times={times}
            lines={[
              { label: 'messages in', values: col(pts, 'messages_in'), color: COLORS[0]! },
              { label: 'emitted', values: col(pts, 'emitted'), color: COLORS[1]! },
              { label: 'late', values: col(pts, 'late'), color: COLORS[3]! },
              { label: 'errors', values: col(pts, 'errors'), color: COLORS[4]! },
            ]}
          />
          <Chart
            id="stream-cycles"
            title={`Cycles and idle flushes ${perStep[range]}, and lag`}
            times={times}
            lines={[
              { label: 'cycles', values: col(pts, 'cycles'), color: COLORS[2]! },
              { label: 'idle flushes', values: col(pts, 'flushes'), color: COLORS[5]! },
              { label: 'lag', values: col(pts, 'lag'), color: COLORS[6]! },
            ]}
          />
          {watermark !== null ? (
            <Chart
              id="stream-watermark"
              title="Event time: seconds the watermark is behind the clock"
              times={times}
              lines={[{ label: 'behind (s)', values: watermarkBehind(pts, data.step), color: COLORS[7]! }]}
            />
          ) : null}
        </>
      ) : null}
    </Section>
  );
}
