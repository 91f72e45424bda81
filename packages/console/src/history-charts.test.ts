import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen, Stream, type RunHandle } from 'queen-mq';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { consolePlugin } from './plugin.js';

// The history charts in a real browser (Debian's Chromium driven by
// playwright-core): a known history (rows written at known minutes and
// hours) plus real traffic (pushes, pops, acks and a running stream), then
// the overview, a queue page and a stream page are opened and the values
// each uPlot chart holds are read back and compared with the history
// routes' answers and with the known rows.

const CHROMIUM = process.env.QUEEN_CHROMIUM ?? '/usr/bin/chromium';
/** Where the screenshot of the queue page goes (not committed). */
const SCREENSHOT = process.env.QUEEN_HISTORY_SCREENSHOT ?? '/tmp/queen-console-history.png';

let b: TestBroker;
let browser: Browser;
let page: Page;
let queen: Queen;
let stream: RunHandle | undefined;
const q = uniqueName('hist-orders');
const source = uniqueName('hist-clicks');
const queryName = `${source}.q`;

const minute = 60_000;
/** The known rows' minutes: 10 to 6 minutes before the test started, and an hour three hours before. */
const nowMinute = Math.floor(Date.now() / minute) * minute;
const known = [10, 9, 8, 7, 6].map((ago, i) => ({
  at: nowMinute - ago * minute,
  pushed: [5, 8, 0, 12, 3][i]!,
  popped: [4, 6, 1, 10, 2][i]!,
  lag: [4, 7, 2, 0, 9][i]!,
  dlq: [0, 1, 1, 2, 2][i]!,
}));
const oldHour = Math.floor((Date.now() - 3 * 3600_000) / 3600_000) * 3600_000;

async function http(method: string, path: string, body?: unknown) {
  return b.http(method, path, body);
}

/** The data a chart holds: its x values (epoch s) and each line's values by label. */
async function chartData(id: string): Promise<{ xs: number[]; lines: Record<string, number[]> }> {
  const handle = await page.waitForFunction(
    (id) => {
      const el = document.querySelector(`[data-chart="${id}"]`) as (HTMLElement & { uplot?: { data: number[][]; series: { label?: string }[] } }) | null;
      const u = el?.uplot;
      if (!u || !u.data[0] || u.data[0].length === 0) return false;
      return { xs: u.data[0], lines: Object.fromEntries(u.series.slice(1).map((s, i) => [s.label ?? String(i), u.data[i + 1]])) };
    },
    id,
    { timeout: 20000 },
  );
  return (await handle.jsonValue()) as { xs: number[]; lines: Record<string, number[]> };
}

/** The chart's value at epoch ms `at` (its x values are bucket starts in seconds). */
const at = (data: { xs: number[]; lines: Record<string, number[]> }, line: string, ms: number) => data.lines[line]![data.xs.indexOf(ms / 1000)];
const sum = (values: number[]) => values.reduce((s, v) => s + v, 0);

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`No Chromium at ${CHROMIUM}: install Debian's (apt-get install -y chromium; .ci/run does) or point QUEEN_CHROMIUM at one`);
  }
  b = await startTestBroker({ plugins: [consolePlugin()], config: { historyFlushMs: 1000 } });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  page = await (await browser.newContext({ viewport: { width: 1200, height: 1600 } })).newPage();
  queen = new Queen({ url: b.url, retries: 0 });

  // The known history: five minutes of queue q and its group g (the hour rows hold their sums, as a flush writes them), and one older hour.
  for (const k of known) {
    await b.sql.query(
      `insert into queen.queue_history as h (queue, consumer_group, step, bucket, pushed, lag, dlq)
       select $1, '', s.step, case when s.step = 60 then $2::timestamptz else date_trunc('hour', $2::timestamptz) end, $3, $4, $5
         from (values (60), (3600)) s(step)
       on conflict (queue, consumer_group, step, bucket) do update set pushed = h.pushed + excluded.pushed, lag = greatest(h.lag, excluded.lag), dlq = greatest(h.dlq, excluded.dlq)`,
      [q, new Date(k.at), k.pushed, k.lag + 1, k.dlq],
    );
    await b.sql.query(
      `insert into queen.queue_history as h (queue, consumer_group, step, bucket, popped, acked, lag)
       select $1, 'g', s.step, case when s.step = 60 then $2::timestamptz else date_trunc('hour', $2::timestamptz) end, $3, $3, $4
         from (values (60), (3600)) s(step)
       on conflict (queue, consumer_group, step, bucket) do update set popped = h.popped + excluded.popped, acked = h.acked + excluded.acked, lag = greatest(h.lag, excluded.lag)`,
      [q, new Date(k.at), k.popped, k.lag],
    );
  }
  await b.sql.query(`insert into queen.queue_history (queue, consumer_group, step, bucket, pushed) values ($1, '', 3600, $2, 100)`, [q, new Date(oldHour)]);

  // Real traffic: 30 pushed to q, 20 of them popped and acked by group g.
  expect((await http('POST', '/api/v1/push', { items: Array.from({ length: 30 }, (_, i) => ({ queue: q, partition: `p${i % 3}`, payload: { i } })) })).status).toBe(201);
  const popped = await http('GET', `/api/v1/pop/queue/${q}?consumerGroup=g&batch=20&partitions=3`);
  expect(popped.body.messages).toHaveLength(20);
  const acked = await http('POST', '/api/v1/ack/batch', {
    consumerGroup: 'g',
    acknowledgments: popped.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
  });
  expect(acked.body.every((r: any) => r.success)).toBe(true);

  // A stream over 6 clicks, counted per minute into a sink.
  await http('POST', '/api/v1/push', { items: Array.from({ length: 6 }, (_, i) => ({ queue: source, partition: 'a', payload: { n: i } })) });
  stream = await Stream.from(queen.queue(source))
    .windowTumbling({ seconds: 3600, idleFlushMs: 500 })
    .aggregate({ count: () => 1 })
    .to(queen.queue(`${source}.out`))
    .run({ queryId: queryName, url: b.url, batchSize: 3 });
  await eventually(async () => {
    const h = await http('GET', `/streams/v1/queries/${encodeURIComponent(queryName)}/history?range=1h`);
    return h.status === 200 && sum(h.body.points.map((p: any) => p.messages_in)) === 6;
  }, 30000);
  // Late events the runner reported three minutes before the others (the runner reports them with its cycles).
  await b.sql.query(
    `insert into queen.stream_history (query_id, step, bucket, late) select query_id, 60, $2, 3 from queen_streams.queries where name = $1`,
    [queryName, new Date(known[2]!.at)],
  );
  // Watermarks its cycles wrote two known minutes (as event time would): 30 s before the first minute began, 20 s into the second.
  for (const [k, wm] of [[known[1]!, known[1]!.at - 30_000], [known[3]!, known[3]!.at + 20_000]] as const) {
    await b.sql.query(
      `insert into queen.stream_history (query_id, step, bucket, watermark_ms) select query_id, 60, $2, $3 from queen_streams.queries where name = $1`,
      [queryName, new Date(k.at), wm],
    );
  }
}, 120000);

afterAll(async () => {
  await stream?.stop();
  await queen?.close();
  await browser?.close();
  await b?.stop();
});

describe('history charts in Chromium', () => {
  it('the queue page plots the known minutes and the real traffic as the history route answers them; 30 days plots the hour rows', async () => {
    await page.goto(`${b.url}/console#/queues/${encodeURIComponent(q)}`);
    const throughput = await chartData('queue-throughput');
    const route = (await http('GET', `/api/v1/history/queues/${q}?range=1h`)).body;
    expect(throughput.xs).toHaveLength(60);
    for (const k of known) {
      expect([at(throughput, 'pushed', k.at), at(throughput, 'popped', k.at), at(throughput, 'acked', k.at)]).toEqual([k.pushed, k.popped, k.popped]);
    }
    // Every value the chart holds is the route's for the same bucket.
    const byT = new Map(route.points.map((p: any) => [Date.parse(p.t) / 1000, p]));
    const matched = throughput.xs.filter((x) => byT.has(x));
    expect(matched.length).toBeGreaterThanOrEqual(58);
    for (const x of matched) {
      const p = byT.get(x) as any;
      const i = throughput.xs.indexOf(x);
      expect([throughput.lines.pushed![i], throughput.lines.popped![i], throughput.lines.acked![i]]).toEqual([p.pushed, p.popped, p.acked]);
    }
    // 28 known plus the 30 pushed now; 23 known popped plus the 20 popped and acked now.
    expect(sum(throughput.lines.pushed!)).toBe(58);
    expect(sum(throughput.lines.popped!)).toBe(43);
    expect(sum(throughput.lines.acked!)).toBe(43);

    const lag = await chartData('queue-lag');
    expect(known.map((k) => at(lag, 'g', k.at))).toEqual([4, 7, 2, 0, 9]);
    expect(known.map((k) => at(lag, 'depth', k.at))).toEqual([5, 8, 3, 1, 10]);
    const dlq = await chartData('queue-dlq');
    expect(known.map((k) => at(dlq, 'DLQ entries', k.at))).toEqual([0, 1, 1, 2, 2]);
    expect(await page.textContent('[data-testid=queue-totals] [data-total=pushed]')).toBe('58');
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    await page.click('[data-testid=range] button[data-range="30d"]');
    await page.waitForFunction(() => (document.querySelector('[data-chart="queue-throughput"]') as any)?.uplot?.data[0]?.length === 720);
    const month = await chartData('queue-throughput');
    expect(at(month, 'pushed', oldHour)).toBe(100);
    expect(sum(month.lines.pushed!)).toBe(158);
    expect(sum(month.lines.popped!)).toBe(43);
  });

  it('the overview plots every queue summed, as the overview route answers it', async () => {
    await page.goto(`${b.url}/console#/overview`);
    const chart = await chartData('overview-throughput');
    const route = (await http('GET', '/api/v1/history?range=1h')).body;
    // The real traffic only (the known rows were written for q alone): 30 + 6 pushed, 20 popped and acked by g,
    // and the stream's pops, acks and sink pushes.
    const routeSum = (f: string) => sum(route.points.map((p: any) => p[f]));
    expect(sum(chart.lines.pushed!)).toBe(routeSum('pushed'));
    expect(sum(chart.lines.popped!)).toBe(routeSum('popped'));
    expect(sum(chart.lines.acked!)).toBe(routeSum('acked'));
    expect(routeSum('pushed')).toBeGreaterThanOrEqual(36);
    expect(routeSum('popped')).toBe(26);
    expect(routeSum('acked')).toBe(26);
  });

  it('the stream page plots messages in, emits and late events, and says when it last committed', async () => {
    await page.goto(`${b.url}/console#/streams/${encodeURIComponent(queryName)}`);
    const flow = await chartData('stream-flow');
    expect(sum(flow.lines['messages in']!)).toBe(6);
    expect(at(flow, 'late', known[2]!.at)).toBe(3);
    const route = (await http('GET', `/streams/v1/queries/${encodeURIComponent(queryName)}/history?range=1h`)).body;
    expect(sum(flow.lines.emitted!)).toBe(sum(route.points.map((p: any) => p.emitted)));
    const cycles = await chartData('stream-cycles');
    expect(sum(cycles.lines.cycles!)).toBe(sum(route.points.map((p: any) => p.cycles)));
    expect(sum(cycles.lines.cycles!)).toBeGreaterThanOrEqual(2);
    expect(await page.textContent('[data-testid=stream-idle]')).toMatch(/Last commit: .+ ago\)/);
    // The watermark: behind each minute's end, carried over the minute where it did not move.
    expect(route.points.filter((p: any) => p.watermark !== null).map((p: any) => p.watermark)).toEqual([known[1]!.at - 30_000, known[3]!.at + 20_000]);
    const behind = await chartData('stream-watermark');
    expect([1, 2, 3, 4].map((i) => at(behind, 'behind (s)', known[i]!.at))).toEqual([90, 150, 40, 100]);
    expect(at(behind, 'behind (s)', known[0]!.at)).toBeNull();
    expect(await page.getAttribute('[data-testid=stream-idle] [data-watermark]', 'data-watermark')).toBe(String(known[3]!.at + 20_000));
  });
});
