import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';
import { LIST_GROUPS_SQL } from './consumer-groups.js';

// Issue 31: a page of a listing costs what the page holds, not what the
// database holds, and a /metrics scrape's size follows the top N, not the
// number of queues. The same pages are
// timed at SMALL queues and again after the database grew to QUEUES queues x
// PARTITIONS partitions with a pending message each, every partition under a
// queue-mode cursor, plus GROUPS consumer groups; then paging must return
// every queue and group exactly once, and ?search= only the matching names.

// The two sizes compared: 100x the queues, the same pages.
const SMALL = 30;
const QUEUES = 3_000;
const PARTITIONS = 10;
// Consumer groups besides __QUEUE_MODE__, one cursor each.
const GROUPS = 300;
/** Partitions of one more queue, lb-big, first by name: on the first page of every queue listing. */
const BIG = 20_000;
/** QUEEN_METRICS_TOP_N of this broker, and the page size of every listing read. */
const TOP_N = 100;
const PAGE = 100;
/** A page at QUEUES may take this many times a page at SMALL (plus a fixed slack for a loaded machine). */
const GROWTH = 4;
const SLACK_MS = 40;

const queueName = (i: number) => `lq-${String(i).padStart(5, '0')}`;
const groupName = (i: number) => `lg-${String(i).padStart(4, '0')}`;

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { metricsTopN: TOP_N } });
});
afterAll(async () => b?.stop());

/**
 * Rows a route's statements read from the tables that grow with partitions
 * (partitions, cursors, messages, their DLQ entries and segments): each
 * statement the broker sent while answering `path` (its reads; the broker's
 * own writes were recounted first) run again under EXPLAIN ANALYZE, every
 * scan node's rows plus those its filter dropped, times its loops.
 */
const PER_PARTITION_TABLES = new Set(['partitions', 'cursors', 'messages', 'dlq', 'log_segments']);
async function partitionRowsReadBy(path: string): Promise<{ rows: number; byTable: Record<string, number> }> {
  await (b.ctx as { totals?: { flush(): Promise<void> } }).totals?.flush();
  const db = b.ctx.db;
  const sent: { text: string; values?: unknown[] }[] = [];
  const query = db.query.bind(db);
  db.query = ((text: string | { text: string }, values?: unknown[]) => {
    sent.push({ text: typeof text === 'string' ? text : text.text, values });
    return query(text as never, values);
  }) as typeof db.query;
  try {
    await get(path);
  } finally {
    db.query = query;
  }
  const byTable: Record<string, number> = {};
  const walk = (node: Record<string, any>) => {
    const table = node['Relation Name'];
    if (PER_PARTITION_TABLES.has(table)) {
      const read = (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops'];
      byTable[table] = (byTable[table] ?? 0) + read;
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  for (const s of sent) {
    if (!/^\s*(select|with)\b/i.test(s.text) || /listing_totals_refresh/.test(s.text)) continue;
    const { rows } = await b.sql.query(`explain (analyze, format json) ${s.text}`, s.values);
    walk(rows[0]['QUERY PLAN'][0].Plan);
  }
  return { rows: Object.values(byTable).reduce((x, y) => x + y, 0), byTable };
}

/** Queues [from, to) with PARTITIONS partitions, one pending message each, a queue-mode cursor on each, and group g's cursor on queue g's partition p0. */
async function seed(from: number, to: number): Promise<void> {
  for (let start = from; start < to; start += 500) {
    const end = Math.min(start + 500, to);
    const targets = [];
    for (let q = start; q < end; q++) for (let p = 0; p < PARTITIONS; p++) targets.push({ queue: queueName(q), partition: `p${p}` });
    await b.sql.query('select queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(targets)]);
  }
  const mine = `p.queue_name >= '${queueName(from)}' and p.queue_name < '${queueName(to)}'`;
  await b.sql.query(
    `insert into queen.messages (partition_id, msg_offset, id, payload, created_at)
     select p.id, 1, gen_random_uuid(), '1', now() - interval '1 minute' from queen.partitions p where ${mine}`,
  );
  await b.sql.query(`update queen.partitions p set head_offset = 1, first_offset = 1 where ${mine}`);
  await b.sql.query(`insert into queen.cursors (partition_id, consumer_group, cursor_offset) select p.id, '__QUEUE_MODE__', 0 from queen.partitions p where ${mine}`);
  await b.sql.query(
    `insert into queen.cursors (partition_id, consumer_group, cursor_offset)
     select p.id, 'lg-' || lpad(substr(p.queue_name, 4)::int::text, 4, '0'), 0
       from queen.partitions p where ${mine} and p.name = 'p0' and substr(p.queue_name, 4)::int < $1`,
    [GROUPS],
  );
  await b.sql.query('analyze queen.queues, queen.partitions, queen.cursors, queen.messages');
}

async function get(path: string): Promise<{ body: any; bytes: number }> {
  const res = await fetch(`${b.url}${path}`);
  const text = await res.text();
  expect(res.status, `${path}: ${text.slice(0, 200)}`).toBe(200);
  return { body: path === '/metrics' ? text : JSON.parse(text), bytes: text.length };
}

/** Median milliseconds of a few calls of `path` (after one warm-up call). */
async function medianMs(path: string, n = 7): Promise<number> {
  await get(path);
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await get(path);
    ms.push(performance.now() - t);
  }
  return ms.sort((x, y) => x - y)[n >> 1]!;
}

const PAGES = {
  queues: `/api/v1/resources/queues?limit=${PAGE}&offset=${PAGE}`,
  consoleQueues: `/api/v1/console/queues?limit=${PAGE}&offset=${PAGE}`,
  // Groups other than __QUEUE_MODE__, whose one group spans every partition
  // here (a group's own rollup costs its lagging partitions: see
  // consumer-groups.ts); the page is found among all the groups.
  groups: `/api/v1/consumer-groups?limit=${PAGE}&offset=${PAGE}&search=lg-`,
};

describe(`listings and /metrics at ${QUEUES} queues x ${PARTITIONS} partitions`, () => {
  const small: Record<string, number> = {};
  let smallMetricsBytes = 0;

  it(`times each page at ${SMALL} queues`, async () => {
    await seed(0, SMALL);
    // This broker's per-queue counters learn every queue it pushes to.
    await b.http('POST', '/api/v1/push', { items: Array.from({ length: SMALL }, (_, q) => ({ queue: queueName(q), partition: 'p9', payload: q })) });
    for (const [name, path] of Object.entries(PAGES)) small[name] = await medianMs(path);
    console.log(`pages at ${SMALL} queues (median ms): ${JSON.stringify(small)}`);
    smallMetricsBytes = (await get('/metrics')).bytes;
  });

  it(`a page at ${QUEUES} queues costs at most ${GROWTH}x a page at ${SMALL} (plus ${SLACK_MS} ms)`, async () => {
    await seed(SMALL, QUEUES);
    await b.http('POST', '/api/v1/push', { items: Array.from({ length: QUEUES - SMALL }, (_, q) => ({ queue: queueName(SMALL + q), partition: 'p9', payload: q })) });
    const full: Record<string, number> = {};
    for (const [name, path] of Object.entries(PAGES)) full[name] = await medianMs(path);
    console.log(`pages at ${QUEUES} queues (median ms): ${JSON.stringify(full)}`);
    for (const name of Object.keys(PAGES)) {
      expect(full[name], `${name}: ${small[name]!.toFixed(1)} ms at ${SMALL} queues, ${full[name]!.toFixed(1)} ms at ${QUEUES}`).toBeLessThanOrEqual(
        GROWTH * small[name]! + SLACK_MS,
      );
    }
  }, 180_000);

  it(`/metrics shows at most ${TOP_N} label sets per series and stays bounded`, async () => {
    const { body: text, bytes } = await get('/metrics');
    const perName = new Map<string, number>();
    for (const line of (text as string).split('\n')) {
      const m = /^(queen_[a-z_]+)\{/.exec(line);
      if (m && !m[1]!.startsWith('queen_http_')) perName.set(m[1]!, (perName.get(m[1]!) ?? 0) + 1);
    }
    expect(perName.get('queen_messages_pushed_total')).toBe(TOP_N);
    expect(perName.get('queen_queue_depth')).toBe(TOP_N);
    for (const [name, n] of perName) expect(n, name).toBeLessThanOrEqual(TOP_N);
    // 100x the queues; the scrape may grow by what the top-N sets hold, not per queue.
    console.log(`/metrics: ${smallMetricsBytes} B at ${SMALL} queues, ${bytes} B at ${QUEUES}`);
    expect(bytes).toBeLessThan(smallMetricsBytes + 40_000);
  });

  it('paging the queue listings returns every queue exactly once, in name order', async () => {
    for (const route of ['/api/v1/resources/queues', '/api/v1/console/queues']) {
      const seen: string[] = [];
      let total = -1;
      for (let offset = 0; ; offset += 700) {
        const { body } = await get(`${route}?limit=700&offset=${offset}`);
        total = body.total;
        if (body.queues.length === 0) break;
        seen.push(...body.queues.map((q: { name: string }) => q.name));
      }
      const lq = seen.filter((n) => n.startsWith('lq-'));
      expect(lq, route).toEqual(Array.from({ length: QUEUES }, (_, i) => queueName(i)));
      expect(new Set(seen).size, route).toBe(seen.length);
      expect(total, route).toBe(seen.length);
    }
  });

  it("a page of groups reads the page's cursors, not every cursor", async () => {
    // EXPLAIN ANALYZE of the listing's statement: rows read from queen.cursors
    // (every scan node, times its loops, with what its filter dropped).
    const { rows } = await b.sql.query(`explain (analyze, format json) ${LIST_GROUPS_SQL}`, [PAGE, PAGE, 'lg-']);
    let read = 0;
    const walk = (node: Record<string, any>) => {
      if (node['Relation Name'] === 'cursors') read += (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'];
      for (const child of node.Plans ?? []) walk(child);
    };
    walk(rows[0]['QUERY PLAN'][0].Plan);
    // The name walk (one row per group) and the page's own cursors; the old
    // statement read all ~30,000 cursor rows.
    expect(read).toBeLessThanOrEqual(2 * (GROUPS + PAGE) + 10);
  });

  it('paging the consumer groups returns every group exactly once', async () => {
    const seen: string[] = [];
    for (let offset = 0; ; offset += 70) {
      const { body } = await get(`/api/v1/consumer-groups?limit=70&offset=${offset}`);
      if (body.length === 0) break;
      seen.push(...body.map((g: { name: string }) => g.name));
    }
    expect(seen.filter((n) => n.startsWith('lg-'))).toEqual(Array.from({ length: GROUPS }, (_, i) => groupName(i)));
    expect(seen).toContain('__QUEUE_MODE__');
    expect(new Set(seen).size).toBe(seen.length);
  });

  it("a group's detail pages its partitions with ?limit=&offset= (every partition without them)", async () => {
    const group = '__QUEUE_MODE__';
    const all = (await get(`/api/v1/consumer-groups/${group}`)).body.partitions.map((p: { partitionId: string }) => p.partitionId);
    expect(all.length).toBeGreaterThanOrEqual(QUEUES * PARTITIONS);
    const paged: string[] = [];
    for (let offset = 0; ; offset += 4_000) {
      const { body } = await get(`/api/v1/consumer-groups/${group}?limit=4000&offset=${offset}`);
      if (body.partitions.length === 0) break;
      paged.push(...body.partitions.map((p: { partitionId: string }) => p.partitionId));
    }
    expect(paged).toEqual(all);
    const lq7 = (await get(`/api/v1/consumer-groups/${group}?queue=${queueName(7)}&limit=3&offset=9`)).body.partitions;
    expect(lq7.map((p: { partition: string; lag: number }) => [p.partition, p.lag])).toEqual([['p9', 2]]);
    expect((await fetch(`${b.url}/api/v1/consumer-groups/lg-none?limit=3&offset=9`)).status).toBe(404);
  });

  it('?search= lists only the names containing the text, counted in total', async () => {
    const expected = [queueName(123), ...Array.from({ length: 10 }, (_, i) => queueName(1230 + i))];
    for (const route of ['/api/v1/resources/queues', '/api/v1/console/queues']) {
      const { body } = await get(`${route}?search=0123`);
      expect(body.queues.map((q: { name: string }) => q.name), route).toEqual(expected);
      expect(body.total, route).toBe(expected.length);
      const page = await get(`${route}?search=0123&limit=4&offset=8`);
      expect(page.body.queues.map((q: { name: string }) => q.name), route).toEqual(expected.slice(8));
    }
    const { body: console } = await get(`/api/v1/console/queues?search=${queueName(7)}`);
    expect(console.queues[0]).toMatchObject({ name: queueName(7), partitions: PARTITIONS, depth: PARTITIONS + 1, dlq: 0 });
    expect(console.queues[0].oldestUnackedSeconds).toBeGreaterThanOrEqual(59);
    const { body: groups } = await get('/api/v1/consumer-groups?search=lg-001');
    expect(groups.map((g: { name: string }) => g.name)).toEqual(Array.from({ length: 10 }, (_, i) => groupName(10 + i)));
    expect(groups[0]).toMatchObject({ totalLag: 1, partitionsWithLag: 1, queues: [{ queue: queueName(10), lag: 1 }] });
    expect(groups[0].maxTimeLag).toBeGreaterThanOrEqual(59);
    // Wildcard characters of LIKE are plain text here.
    expect((await get('/api/v1/resources/queues?search=%25')).body.total).toBe(0);
    expect((await get('/api/v1/resources/queues?search=lq_')).body.total).toBe(0);
  });

  it(`a page of queues, groups or /metrics reads no partition, cursor or message row, with a queue of ${BIG} partitions on it`, async () => {
    // lb-big: BIG partitions with a pending message each under a queue-mode
    // cursor, first by name; counted through one push like the others.
    const targets = Array.from({ length: BIG }, (_, p) => ({ queue: 'lb-big', partition: `p${p}` }));
    await b.sql.query('select queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(targets)]);
    await b.sql.query(
      `insert into queen.messages (partition_id, msg_offset, id, payload, created_at)
       select p.id, 1, gen_random_uuid(), '1', now() - interval '1 minute' from queen.partitions p where p.queue_name = 'lb-big'`,
    );
    await b.sql.query(`update queen.partitions p set head_offset = 1, first_offset = 1 where p.queue_name = 'lb-big'`);
    await b.sql.query(`insert into queen.cursors (partition_id, consumer_group, cursor_offset) select p.id, '__QUEUE_MODE__', 0 from queen.partitions p where p.queue_name = 'lb-big'`);
    await b.sql.query('analyze queen.partitions, queen.cursors, queen.messages');
    await b.http('POST', '/api/v1/push', { items: [{ queue: 'lb-big', partition: 'p0', payload: 1 }] });
    const { body: page } = await get(`/api/v1/console/queues?limit=${PAGE}`);
    expect(page.queues[0]).toMatchObject({ name: 'lb-big', partitions: BIG, depth: BIG + 1, retained: BIG + 1 });
    expect(page.queues[0].oldestUnackedSeconds).toBeGreaterThanOrEqual(59);

    // The old statements read every partition and cursor of the page's
    // queues (over 20,000 here), and /metrics every one in the database.
    for (const path of [`/api/v1/resources/queues?limit=${PAGE}`, `/api/v1/console/queues?limit=${PAGE}`, `/api/v1/consumer-groups?limit=${PAGE}`, '/metrics']) {
      const read = await partitionRowsReadBy(path);
      expect.soft(read.rows, `${path}: ${JSON.stringify(read.byTable)}`).toBeLessThanOrEqual(10);
    }
  }, 120_000);
});
