import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen, Stream, type RunHandle } from 'queen-mq';
import { kvBrokerFeature } from '@queen-mq/kv/broker';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { consolePlugin } from './plugin.js';

// The console in a real browser (Debian's Chromium driven by playwright-core)
// against a real broker with auth on: data is made over HTTP and by a running
// stream, then every page is read as an operator sees it, the DLQ requeue is
// done by clicking, and a read-only token is shown the same data without the
// buttons (and refused by the broker when it tries anyway).

/** Debian's package; .ci/run installs it. Playwright's own browser download cannot be reached here. */
const CHROMIUM = process.env.QUEEN_CHROMIUM ?? '/usr/bin/chromium';
const ADMIN = 'console-admin-key';
const VIEWER = 'console-viewer-key';

let b: TestBroker;
let browser: Browser;
let queen: Queen;
let stream: RunHandle | undefined;
const orders = uniqueName('orders');
const sink = `${orders}.per_hour`;
const queryId = `${orders}.q`;
const jobs = uniqueName('jobs');
const ns = uniqueName('ns');
let deadId: string;

const http = (method: string, path: string, body?: unknown, token = ADMIN) => b.http(method, path, body, { authorization: `Bearer ${token}` });

async function push(queue: string, partition: string, payloads: unknown[]) {
  const res = await http('POST', '/api/v1/push', { items: payloads.map((payload) => ({ queue, partition, payload })) });
  expect(res.status).toBe(201);
}

/** Pushes one message to `queue`, fails it `failures` times, then dead-letters it in queue mode with `error`. */
async function deadLetter(queue: string, payload: unknown, error: string, failures = 0): Promise<string> {
  await push(queue, 'Default', [payload]);
  for (let attempt = 0; ; attempt++) {
    const popped = await http('GET', `/api/v1/pop/queue/${queue}?batch=1`);
    expect(popped.status).toBe(200);
    const m = popped.body.messages[0];
    const status = attempt < failures ? 'failed' : 'dlq';
    const acked = await http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status, error });
    expect(acked.status).toBe(200);
    if (status === 'dlq') return m.id;
  }
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`No Chromium at ${CHROMIUM}: install Debian's (apt-get install -y chromium; .ci/run does) or point QUEEN_CHROMIUM at one`);
  }
  const kv = kvBrokerFeature();
  b = await startTestBroker({
    plugins: [...kv.plugins, consolePlugin()],
    migrations: [...kv.migrations],
    config: {
      authEnabled: true,
      apiKeys: [
        { key: ADMIN, level: 'admin', subject: 'ops' },
        { key: VIEWER, level: 'read-only', subject: 'viewer' },
      ],
    },
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  queen = new Queen({ url: b.url, bearerToken: ADMIN, retries: 0 });

  // Queue: two partitions of orders, read by an hour-long tumbling window (open for the whole test).
  await http('POST', '/api/v1/configure', { queue: orders, options: { leaseTime: 10 } });
  await push(orders, 'eu', [1, 2, 3, 4, 5].map((amount) => ({ amount })));
  await push(orders, 'us', [10, 20, 30].map((amount) => ({ amount })));
  stream = await Stream.from(queen.queue(orders))
    .windowTumbling({ seconds: 3600, idleFlushMs: 500 })
    .aggregate({ count: () => 1, sum: (m: { amount: number }) => m.amount })
    .to(queen.queue(sink))
    .run({ queryId, url: b.url, bearerToken: ADMIN, batchSize: 50 });
  await eventually(async () => {
    const w = await http('GET', `/streams/v1/queries/${encodeURIComponent(queryId)}/windows`);
    return w.status === 200 && w.body.windows.length === 2;
  }, 20000);

  // DLQ: one message dead-lettered with an error.
  deadId = await deadLetter(jobs, { job: 'resize', image: 7 }, 'boom: image too large', 2);

  // KV: two keys under a prefix, one with a TTL, one outside the prefix.
  await http('PUT', `/api/v1/kv/${ns}/user:1`, { value: { name: 'ada' }, ttlSeconds: 3600 });
  await http('PUT', `/api/v1/kv/${ns}/user:2`, { value: { name: 'grace' } });
  await http('PUT', `/api/v1/kv/${ns}/other`, { value: 1 });
}, 90000);

afterAll(async () => {
  await stream?.stop();
  await queen?.close();
  await browser?.close();
  await b?.stop();
});

/** A page of a fresh browser context (its own sessionStorage), signed in with `token`. */
async function signedIn(token: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on('dialog', (d) => void d.accept());
  await page.goto(`${b.url}/console`);
  await page.fill('input[name=token]', token);
  await page.click('form.login button[type=submit]');
  await page.waitForSelector('[data-testid=level]');
  return { context, page };
}

/** The text of `selector`, once it matches `pattern` (the page refreshes on its own). */
async function textOf(page: Page, selector: string, pattern: RegExp, timeout = 15000): Promise<string> {
  const handle = await page.waitForFunction(
    ({ selector, source, flags }) => {
      const el = document.querySelector(selector);
      const text = el?.textContent ?? '';
      return new RegExp(source, flags).test(text) ? text : false;
    },
    { selector, source: pattern.source, flags: pattern.flags },
    { timeout },
  );
  return (await handle.jsonValue()) as string;
}

/** Shows a page of the console; the same address again reloads it rather than wait for its refresh. */
async function open(page: Page, hash: string) {
  const url = `${b.url}/console${hash}`;
  if (page.url() === url) await page.reload();
  else await page.goto(url);
}

const cells = (page: Page, rowSelector: string) => page.$$eval(`${rowSelector} td`, (tds) => tds.map((td) => td.textContent?.trim() ?? ''));

describe('console plugin', () => {
  it('serves the page and its assets without a token (they hold no data), with a CSP; an unknown asset is a 404', async () => {
    const page = await fetch(`${b.url}/console`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(await page.text()).toContain('<script type="module" src="/console/assets/console.js">');
    const css = await fetch(`${b.url}/console/assets/console.css`);
    expect([css.status, css.headers.get('content-type')]).toEqual([200, 'text/css; charset=utf-8']);
    const missing = await fetch(`${b.url}/console/assets/secrets.json`);
    expect(missing.status).toBe(404);
    expect((await missing.json()).code).toBe('ROUTE_NOT_FOUND');
    // The data behind it still needs a token.
    expect((await fetch(`${b.url}/api/v1/console/session`)).status).toBe(401);
  });

  it('a broker whose console UI is not built still starts; the page answers 503 saying so', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'console-ui-'));
    const bare = await startTestBroker({ plugins: [consolePlugin({ uiDir: empty, prefix: '/ops' })] });
    try {
      const res = await fetch(`${bare.url}/ops`);
      expect(res.status).toBe(503);
      expect(await res.text()).toMatch(/not built: run `npm run build`/);
      expect((await bare.http('GET', '/health')).status).toBe(200);
    } finally {
      await bare.stop();
      await rm(empty, { recursive: true, force: true });
    }
  });
});

describe('operator console in Chromium', () => {
  let admin: { context: BrowserContext; page: Page };
  beforeAll(async () => {
    admin = await signedIn(ADMIN);
  });
  afterAll(async () => admin?.context.close());

  it('asks for a token when auth is on, and shows the level it grants', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${b.url}/console`);
    await page.waitForSelector('form.login input[name=token]');
    expect(await page.$('[data-testid=level]')).toBeNull();
    await context.close();
    expect(await admin.page.textContent('[data-testid=level]')).toBe('admin');
  });

  it('queues: depth, partitions and DLQ size per queue; a queue shows its messages and a payload', async () => {
    const { page } = admin;
    await open(page, `#/queues`);
    const row = `[data-testid=queues] tr[data-queue="${orders}"]`;
    await page.waitForSelector(row);
    const [name, partitions, depth, retained] = await cells(page, row);
    // configure made the Default partition beside eu and us.
    expect([name, partitions, depth, retained]).toEqual([orders, '3', '8', '8']);
    expect(await textOf(page, `[data-testid=queues] tr[data-queue="${jobs}"] [data-col=dlq]`, /^1$/)).toBe('1');

    await page.click(`${row} a`);
    await page.waitForSelector('[data-testid=partitions]');
    await page.selectOption('select', 'eu');
    await page.waitForSelector('[data-testid=messages] tr[data-offset="5"]');
    expect(await page.$$eval('[data-testid=messages] tbody tr', (rows) => rows.map((r) => r.getAttribute('data-offset')))).toEqual(['5', '4', '3', '2', '1']);
    await page.click('[data-testid=messages] tr[data-offset="3"]');
    expect(JSON.parse(await page.textContent('[data-testid=payload] pre') ?? '')).toEqual({ amount: 3 });
  });

  it('queues: the broker searches and pages the list (125 matching queues: 100, then 25)', async () => {
    const { page } = admin;
    const many = uniqueName('many');
    const names = Array.from({ length: 125 }, (_, i) => `${many}-${String(i).padStart(3, '0')}`);
    const res = await http('POST', '/api/v1/push', { items: names.map((queue) => ({ queue, payload: 1 })) });
    expect(res.status).toBe(201);
    const listed = () => page.$$eval('[data-testid=queues] tbody tr', (rows) => rows.map((r) => r.getAttribute('data-queue')));
    const requests: string[] = [];
    page.on('request', (r) => void (r.url().includes('/api/v1/console/queues') && requests.push(r.url())));

    await open(page, '#/queues');
    await page.waitForSelector('[data-testid=queues]');
    await page.fill('input[name=search]', many);
    await textOf(page, '[data-testid=pager-range]', /^1–100 of 125$/);
    const first = await listed();
    expect(first).toEqual(names.slice(0, 100));
    // The filter and the page went to the broker, which answered one page.
    expect(requests.some((u) => u.includes(`search=${many}`) && u.includes('limit=100') && u.includes('offset=0'))).toBe(true);

    await page.click('[data-testid=pager] button:has-text("Next")');
    await textOf(page, '[data-testid=pager-range]', /^101–125 of 125$/);
    const second = await listed();
    expect(second).toEqual(names.slice(100));
    expect(new Set([...first, ...second]).size).toBe(125);

    // A new search starts again at the first page.
    await page.fill('input[name=search]', `${many}-12`);
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid=queues] tbody tr').length === n, 5);
    expect(await listed()).toEqual(names.slice(120));
    expect(await page.$('[data-testid=pager]')).toBeNull();
    await page.fill('input[name=search]', `${many}-none`);
    await textOf(page, 'main p.muted', /No queue name contains/);
  });

  it('consumer groups: the broker searches the list', async () => {
    const { page } = admin;
    const group = `streams.${queryId}`;
    await open(page, '#/groups');
    await page.waitForSelector(`[data-testid=groups] tr[data-group="${group}"]`);
    await page.fill('input[name=search]', queryId);
    await page.waitForFunction(
      (g) => {
        const rows = [...document.querySelectorAll('[data-testid=groups] tbody tr')];
        return rows.length === 1 && rows[0]!.getAttribute('data-group') === g;
      },
      group,
    );
  });

  it("consumer groups: each queue of a group shows its own state, as the CLI's rows do; the group's state once", async () => {
    const { page } = admin;
    const group = uniqueName('mixed');
    const caughtUp = uniqueName('con-gs-a');
    const behind = uniqueName('con-gs-b');
    for (const q of [caughtUp, behind]) await http('POST', '/api/v1/push', { items: [1, 2].map((payload) => ({ queue: q, payload })) });
    expect((await http('GET', `/api/v1/pop/queue/${caughtUp}?consumerGroup=${group}&batch=2&autoAck=true`)).body.messages).toHaveLength(2);
    expect((await http('GET', `/api/v1/pop/queue/${behind}?consumerGroup=${group}&batch=1&autoAck=true`)).body.messages).toHaveLength(1);
    await b.sql.query(`update queen.messages m set created_at = m.created_at - interval '2 minutes' from queen.partitions p where p.id = m.partition_id and p.queue_name = $1`, [behind]);
    await b.ctx.totals.flush();
    await open(page, '#/groups');
    await page.fill('input[name=search]', group);
    const row = `[data-testid=groups] tr[data-group="${group}"]`;
    // The page polls every 5 s and the listing totals follow writes asynchronously: a generous wait.
    expect(await textOf(page, `${row} [data-queue="${caughtUp}"] .badge`, /^Stable$/, 40000)).toBe('Stable');
    expect(await textOf(page, `${row} [data-queue="${behind}"] .badge`, /^Lagging$/, 40000)).toBe('Lagging');
    expect(await page.textContent(`${row} td:last-child .badge`)).toBe('Lagging');
  });

  it('consumer groups: the stream group with lag per partition and its subscription mode', async () => {
    const { page } = admin;
    const group = `streams.${queryId}`;
    await open(page, `#/groups`);
    expect(await textOf(page, `[data-testid=groups] tr[data-group="${group}"] [data-col=lag]`, /^0$/)).toBe('0');
    await page.click(`[data-testid=groups] tr[data-group="${group}"] a`);
    await page.waitForSelector(`[data-testid=group-partitions] tr[data-partition="${orders}/eu"]`);
    const eu = await cells(page, `[data-testid=group-partitions] tr[data-partition="${orders}/eu"]`);
    expect(eu.slice(0, 5)).toEqual([orders, 'eu', '5', '5', '0']);
    expect(await page.textContent('[data-testid=subscriptions] [data-col=mode]')).toMatch(/\w+/);
    // An admin may seek: the controls are there.
    expect(await page.$(`[data-seek="${orders}"] button`)).not.toBeNull();
  });

  it('consumer groups: seeking a partition back to an offset from the page', async () => {
    const { page } = admin;
    const popped = await http('GET', `/api/v1/pop/queue/${orders}/partition/eu?consumerGroup=audit&batch=10&autoAck=true`);
    expect(popped.body.messages.length).toBeGreaterThanOrEqual(5);
    const head = popped.body.messages.at(-1).offset;
    await open(page, '#/groups/audit');
    const row = `[data-testid=group-partitions] tr[data-partition="${orders}/eu"]`;
    expect(await textOf(page, `${row} [data-col=lag]`, /^0$/)).toBe('0');
    await page.fill(`${row} input`, '2');
    await page.click(`${row} button`);
    expect(await textOf(page, `${row} [data-col=lag]`, /^[1-9]/)).toBe(String(Number(head) - 2));
    const group = await http('GET', `/api/v1/consumer-groups/audit?queue=${orders}`);
    expect(group.body.partitions.find((p: any) => p.partition === 'eu').cursor).toBe('2');
  });

  it('streams: the query with its counters, cursors per partition and live open windows', async () => {
    const { page } = admin;
    await open(page, `#/streams`);
    const row = `[data-testid=streams] tr[data-query="${queryId}"]`;
    const cycles = await textOf(page, `${row} [data-col=cycles]`, /^[1-9]\d*$/);
    expect(Number(cycles)).toBeGreaterThan(0);
    expect(await page.textContent(`${row} [data-col=errors]`)).toBe('0');

    await page.click(`${row} a`);
    expect(await textOf(page, '[data-testid=stream-partitions] tr[data-partition=eu] [data-col=cursor]', /^5$/)).toBe('5');
    expect(await page.textContent('[data-testid=stream-partitions] tr[data-partition=us] [data-col=cursor]')).toBe('3');
    await page.waitForSelector('[data-testid=windows] tbody tr:nth-child(2)');
    const aggregates = await page.$$eval('[data-testid=windows] [data-col=aggregate]', (tds) => tds.map((td) => JSON.parse(td.textContent ?? '')));
    expect(aggregates).toEqual(expect.arrayContaining([{ acc: { count: 5, sum: 15 } }, { acc: { count: 3, sum: 60 } }]));
    expect(aggregates).toHaveLength(2);
    expect(await page.$$eval('[data-testid=windows] [data-col=ripeness]', (tds) => tds.map((td) => td.textContent))).toEqual([
      expect.stringMatching(/^open, ends in /),
      expect.stringMatching(/^open, ends in /),
    ]);

    // Live: new orders fold into the open window and the page shows it without a reload.
    await push(orders, 'eu', [{ amount: 100 }]);
    await textOf(page, '[data-testid=windows]', /"sum":115,"count":6|"count":6,"sum":115/, 20000);
  });

  it("streams: a join's buffered records per side, live", async () => {
    const left = uniqueName('clicks');
    const right = uniqueName('views');
    const joinId = `${left}.j`;
    await push(left, 'eu', [{ k: 'a' }, { k: 'b' }]);
    await push(right, 'eu', [{ k: 'z' }]);
    const joined = await Stream.from<{ k: string }>(queen.queue(left))
      .join<{ k: string }, { k: string }>(queen.queue(right), { within: { seconds: 3600 }, key: (m) => m.k, select: (l) => ({ k: l.k }) })
      .to(queen.queue(`${left}.out`))
      .run({ queryId: joinId, url: b.url, bearerToken: ADMIN, batchSize: 50 });
    try {
      const { page } = admin;
      await open(page, `#/streams/${encodeURIComponent(joinId)}`);
      const row = '[data-testid=joins] tr[data-partition=eu]';
      // Both orders wait for a view of their key, the view for a click of its own; an hour's bound keeps them all.
      expect(await textOf(page, `${row} [data-col=left-records]`, /^2$/, 20000)).toBe('2');
      expect(await textOf(page, `${row} [data-col=right-records]`, /^1$/)).toBe('1');
      // A view of key a pairs with the held click and is held too: the page follows without a reload.
      await push(right, 'eu', [{ k: 'a' }]);
      expect(await textOf(page, `${row} [data-col=right-records]`, /^2$/, 20000)).toBe('2');
      expect(await page.textContent(`${row} [data-col=left-records]`)).toBe('2');
    } finally {
      await joined.stop();
    }
  });

  it("streams: an event-time query's watermark per source partition, and none in processing time", async () => {
    const events = uniqueName('events');
    const eventId = `${events}.q`;
    const t0 = Date.parse('2026-01-05T10:00:00.000Z');
    await push(events, 'eu', [{ ts: t0 + 1_000 }, { ts: t0 + 7_000 }, { ts: t0 + 4_000 }]);
    await push(events, 'us', [{ ts: t0 + 2_000 }]);
    const windowed = await Stream.from(queen.queue(events))
      .windowTumbling({ seconds: 60, eventTime: (m: any) => m.data.ts })
      .aggregate({ count: () => 1 })
      .to(queen.queue(`${events}.out`))
      .run({ queryId: eventId, url: b.url, bearerToken: ADMIN, batchSize: 50 });
    try {
      const { page } = admin;
      await open(page, `#/streams/${encodeURIComponent(eventId)}`);
      // The newest event time folded on each partition: 7 s in on eu (the 4 s event came after it), 2 s on us.
      const wm = (partition: string) => page.getAttribute(`[data-testid=stream-partitions] tr[data-partition=${partition}] [data-col=watermark]`, 'data-ms');
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=stream-partitions] [data-col=watermark][data-ms]:not([data-ms=""])').length === 2, undefined, { timeout: 20000 });
      expect(await wm('eu')).toBe(String(t0 + 7_000));
      expect(await wm('us')).toBe(String(t0 + 2_000));
      expect(await textOf(page, '[data-testid=stream-partitions] tr[data-partition=eu] [data-col=watermark]', / behind\)$/)).toMatch(/\d.* \(.+ behind\)$/);
      // The processing-time query keeps no watermark.
      await open(page, `#/streams/${encodeURIComponent(queryId)}`);
      expect(await textOf(page, '[data-testid=stream-partitions] tr[data-partition=eu] [data-col=watermark]', /^—$/)).toBe('—');
    } finally {
      await windowed.stop();
    }
  });

  it('DLQ: the entry with its error and retry count; Requeue puts it back on its queue', async () => {
    const { page } = admin;
    const api = (await http('GET', `/api/v1/dlq?queue=${jobs}`)).body;
    expect(api.total).toBe(1);
    expect(api.messages[0].retryCount).toBeGreaterThan(0);
    await open(page, `#/dlq?queue=${jobs}`);
    const row = `[data-testid=dlq] tr[data-id="${deadId}"]`;
    await page.waitForSelector(row);
    expect(await page.textContent(`${row} [data-col=error]`)).toBe('boom: image too large');
    expect(await page.textContent(`${row} [data-col=retries]`)).toBe(String(api.messages[0].retryCount));
    await page.click(row);
    expect(JSON.parse(await page.textContent('[data-testid=dlq-payload] pre') ?? '')).toEqual({ job: 'resize', image: 7 });

    await page.click(`${row} button`);
    expect(await textOf(page, '[data-testid=notice]', /Requeued/)).toBe('Requeued 1 message(s)');
    await page.waitForSelector(row, { state: 'detached' });
    expect((await http('GET', `/api/v1/dlq?queue=${jobs}`)).body.total).toBe(0);
    const again = await http('GET', `/api/v1/pop/queue/${jobs}?batch=10`);
    expect(again.body.messages.map((m: any) => m.data)).toEqual([{ job: 'resize', image: 7 }]);
    const [m] = again.body.messages;
    expect((await http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed' })).status).toBe(200);
  });

  it('DLQ: several entries requeued at once through the selection', async () => {
    const { page } = admin;
    const ids = [await deadLetter(jobs, { n: 1 }, 'e1'), await deadLetter(jobs, { n: 2 }, 'e2')];
    await open(page, `#/dlq?queue=${jobs}`);
    for (const id of ids) await page.check(`[data-testid=dlq] tr[data-id="${id}"] input[type=checkbox]`);
    await page.click('button:has-text("Requeue selected (2)")');
    expect(await textOf(page, '[data-testid=notice]', /Requeued/)).toBe('Requeued 2 message(s)');
    expect((await http('GET', `/api/v1/dlq?queue=${jobs}`)).body.total).toBe(0);
  });

  it('KV: namespaces, then keys under a literal prefix with their TTLs', async () => {
    const { page } = admin;
    await open(page, '#/kv');
    await page.click(`[data-testid=kv-namespaces] a:text-is("${ns}")`);
    await page.waitForSelector('[data-testid=kv] tr[data-key="other"]');
    expect(await page.$$eval('[data-testid=kv] tbody tr', (rows) => rows.map((r) => r.getAttribute('data-key')))).toEqual(['other', 'user:1', 'user:2']);
    await page.fill('input[name=prefix]', 'user:');
    await page.click('form.toolbar button[type=submit]');
    await page.waitForSelector('[data-testid=kv] tr[data-key="other"]', { state: 'detached' });
    await page.waitForSelector('[data-testid=kv] tr[data-key="user:2"]');
    expect(await page.$$eval('[data-testid=kv] tbody tr', (rows) => rows.map((r) => r.getAttribute('data-key')))).toEqual(['user:1', 'user:2']);
    expect(await page.textContent('[data-testid=kv] tr[data-key="user:1"] [data-col=ttl]')).toMatch(/^(59m \d+s|1h)$/);
    expect(await page.textContent('[data-testid=kv] tr[data-key="user:2"] [data-col=ttl]')).toBe('—');
  });

  it('schedules: each with its cron, zone, queue and next fire time; Delete removes it', async () => {
    const name = uniqueName('report');
    const created = await http('POST', '/api/v1/schedules', { name, cron: '0 6 * * *', timeZone: 'Asia/Kolkata', queue: jobs, payload: { report: 'daily' } });
    expect(created.status).toBe(201);
    const { page } = admin;
    await open(page, '#/schedules');
    const row = `[data-testid=schedules] tr[data-schedule="${name}"]`;
    await page.waitForSelector(row);
    const texts = await cells(page, row);
    expect(texts.slice(0, 6)).toEqual([name, '0 6 * * *', 'Asia/Kolkata', `${jobs} / Default`, '{"report":"daily"}', 'one']);
    // The next fire time as this browser writes the broker's nextFireAt, and the wait until it.
    expect(texts[6]).toBe(await page.evaluate((iso) => new Date(iso).toLocaleString(), created.body.nextFireAt as string));
    expect(texts[7]).toMatch(/^\d+[hms]( \d+[ms])?$/);
    await page.click(`${row} button:has-text("Delete")`);
    await page.waitForSelector(row, { state: 'detached' });
    expect((await http('GET', `/api/v1/schedules/${name}`)).status).toBe(404);
  });

  it('a read-only token sees the same data, is offered no action, and is refused if it acts', async () => {
    const id = await deadLetter(jobs, { job: 'ro' }, 'ro failure');
    const viewer = await signedIn(VIEWER);
    try {
      const { page } = viewer;
      expect(await page.textContent('[data-testid=level]')).toBe('read-only');
      await open(page, `#/dlq?queue=${jobs}`);
      const row = `[data-testid=dlq] tr[data-id="${id}"]`;
      await page.waitForSelector(row);
      expect(await page.textContent(`${row} [data-col=error]`)).toBe('ro failure');
      expect(await page.$(`${row} button`)).toBeNull();
      expect(await page.$(`${row} input[type=checkbox]`)).toBeNull();
      expect(await page.textContent('form.toolbar')).toContain('need an admin token');

      await page.goto(`${b.url}/console#/groups/${encodeURIComponent(`streams.${queryId}`)}`);
      await page.waitForSelector('[data-testid=group-partitions] tbody tr');
      expect(await page.$(`[data-seek="${orders}"]`)).toBeNull();

      // The broker, not the page, is what refuses: the same request from this tab with its token.
      const status = await page.evaluate(
        async ({ id, token }) => (await fetch('/api/v1/dlq/requeue', { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ ids: [id] }) })).status,
        { id, token: VIEWER },
      );
      expect(status).toBe(403);
      expect((await http('GET', `/api/v1/dlq?queue=${jobs}`)).body.total).toBe(1);
    } finally {
      await viewer.context.close();
    }
  });
});
