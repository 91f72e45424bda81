import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokerComposition } from '@queen-mq/broker-composition';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { allPages, PAGE } from './api.js';
import { main } from './main.js';
import type { CliIO } from './io.js';

// The operator's commands (status, queues, groups, dlq, streams, kv), global
// flags anywhere on the line, exit codes and `npx queen` from the repository
// root, against a real broker composed like the deployable (KV included).

const repo = fileURLToPath(new URL('../../..', import.meta.url));
const cliPackage = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ ...brokerComposition() });
});
afterAll(async () => b?.stop());

function capture(opts: { stdin?: string; tty?: boolean; signal?: AbortSignal; env?: Record<string, string> } = {}) {
  const out = { stdout: '', stderr: '' };
  const io: CliIO = {
    stdout: { write: (s: string) => (out.stdout += s), isTTY: opts.tty ?? false },
    stderr: { write: (s: string) => (out.stderr += s), isTTY: false },
    stdin: opts.stdin === undefined ? undefined : Object.assign(Readable.from([opts.stdin]), { isTTY: false }),
    env: opts.env ?? { QUEEN_URL: b.url },
    signal: opts.signal,
  };
  return { io, out };
}

async function run(argv: string[], opts: Parameters<typeof capture>[0] = {}) {
  const { io, out } = capture(opts);
  const code = await main(argv, io);
  const lines = out.stdout.split('\n').filter(Boolean);
  return {
    code,
    ...out,
    /** stdout as JSON lines (throws when it is not). */
    get rows(): any[] {
      return lines.map((l) => JSON.parse(l));
    },
  };
}

const text = async (argv: string[]) => {
  const { io, out } = capture({ tty: true });
  const code = await main(argv, io);
  return { code, ...out };
};

async function pushN(queue: string, n: number, partition = 'Default') {
  const res = await b.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i } })) });
  expect(res.status).toBe(201);
}

describe('queen operator commands', () => {
  it('global flags anywhere on the line; --version prints the package version', async () => {
    const q = uniqueName('cli-flags');
    await pushN(q, 1);
    const env = {};
    for (const argv of [
      ['--url', b.url, '--json', 'queues', 'list'],
      ['queues', '--url', b.url, 'list', '--json'],
      ['queues', 'list', `--url=${b.url}`],
    ]) {
      const res = await run(argv, { env });
      expect(res.code, argv.join(' ')).toBe(0);
      expect(res.rows.map((r) => r.name), argv.join(' ')).toContain(q);
    }
    for (const argv of [['--version'], ['queues', '--version'], ['--url', b.url, '--version']]) {
      const res = await run(argv);
      expect([res.code, res.stdout]).toEqual([0, `${cliPackage.version}\n`]);
    }
    // Values of options are never taken for command words.
    const seek = await run(['groups', '--queue', 'list', 'list']);
    expect(seek.code).toBe(0);
    expect(seek.rows).toEqual([]);
  });

  it('usage mistakes exit 2 with a hint; unknown subcommands too', async () => {
    for (const argv of [['queues'], ['queues', 'frob'], ['queues', 'show'], ['queues', 'list', '--nope'], ['kv', 'set', 'ns', 'k', '{bad'], ['dlq', 'list', '--limit', 'x'], ['groups', 'seek', 'g', 'q']]) {
      const res = await run(argv);
      expect(res.code, argv.join(' ')).toBe(2);
      expect(res.stderr, argv.join(' ')).toContain('queen --help');
    }
  });

  it('status shows the broker, database and schema version; exit 0 when ready, 1 when unreachable', async () => {
    const res = await run(['status', '--json']);
    expect(res.code).toBe(0);
    expect(res.rows[0]).toMatchObject({ broker: b.url, ready: true, database: 'connected', version: expect.any(String) });
    expect(res.rows[0].schemaVersion).toBe(res.rows[0].expectedSchemaVersion);
    const table = await text(['status']);
    expect(table.stdout).toMatch(/^field\s+value\n/);
    expect(table.stdout).toMatch(/\nschemaVersion\s+\d+\n/);
    // Schema behind what this broker expects: answers, but not ready (exit 5).
    const other = await startTestBroker();
    try {
      await other.sql.query(`update queen.schema_version set version = version - 1 where owner = 'broker'`);
      await new Promise((r) => setTimeout(r, 1100)); // /ready caches its probe for a second
      const behind = await run(['status', '--url', other.url]);
      expect(behind.code).toBe(5);
      expect(behind.rows[0]).toMatchObject({ ready: false, database: 'connected' });
      expect(behind.rows[0].schemaVersion).toBe(behind.rows[0].expectedSchemaVersion - 1);
    } finally {
      await other.sql.query(`update queen.schema_version set version = version + 1 where owner = 'broker'`);
      await other.stop();
    }
    const down = await run(['status', '--url', 'http://127.0.0.1:9']);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/ECONNREFUSED/);
  });

  it('stats prints a queue\'s history: totals, sparklines and the busy points on a terminal, the route\'s answer with --json', async () => {
    const q = uniqueName('cli-stats');
    await pushN(q, 12);
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}?batch=5`);
    await b.http('POST', '/api/v1/ack/batch', { acknowledgments: popped.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })) });
    const res = await run(['stats', q, '--json']);
    expect(res.code).toBe(0);
    const [answer] = res.rows;
    expect([answer.queue, answer.range, answer.step, answer.points.length]).toEqual([q, '1h', 60, 60]);
    const total = (f: string) => answer.points.reduce((s: number, p: any) => s + p[f], 0);
    expect([total('pushed'), total('popped'), total('acked')]).toEqual([12, 5, 5]);
    const table = await text(['stats', q, '--range', '30d']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^queue ${q}: 720 points of 3600 s`));
    expect(table.stdout).toMatch(/\npushed\s+12\s+12\s+12\s+[▁█]+\n/);
    expect(table.stdout).toMatch(/\npopped\s+5\s+5\s+5\s/);
    expect(table.stdout).toMatch(/\nlag __QUEUE_MODE__\s/);
    expect((await run(['stats', q, '--range', '1y'])).code).toBe(2);
    expect((await run(['stats', uniqueName('none')])).code).toBe(3);
  });

  it('queues list, show, configure and delete (delete needs --yes; an unknown queue exits 3)', async () => {
    const q = uniqueName('cli-q');
    await pushN(q, 3, 'p1');
    const show = await run(['queues', 'show', q]);
    expect(show.code).toBe(0);
    expect(show.rows[0].partitions).toMatchObject([{ name: 'p1', firstOffset: '1', headOffset: '3' }]);
    const shown = await text(['queues', 'show', q]);
    expect(shown.stdout).toMatch(/\np1\s+1\s+3\s+3\s/);

    const conf = await run(['queues', 'configure', q, 'leaseTime=60', 'retryLimit=0', 'retentionEnabled=true']);
    expect(conf.code).toBe(0);
    expect(conf.rows[0].options).toMatchObject({ leaseTime: 60, retryLimit: 0, retentionEnabled: true });
    const reset = await run(['queues', 'configure', q, 'leaseTime=null']);
    expect(reset.rows[0].options).toMatchObject({ leaseTime: 300, retryLimit: 0 });
    const bad = await run(['queues', 'configure', q, 'leaseTime="soon"']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('body.options.leaseTime');

    expect((await run(['queues', 'delete', q])).code).toBe(2);
    const del = await run(['queues', 'delete', q, '--yes']);
    expect([del.code, del.rows[0]]).toEqual([0, { deleted: true, queue: q, existed: true }]);
    expect((await run(['queues', 'delete', q, '--yes'])).code).toBe(3);
    const gone = await run(['queues', 'show', q]);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toContain('QUEUE_NOT_FOUND (HTTP 404)');
  });

  it("groups list: each (group, queue) row is that queue's own lag, members and state, not the group's", async () => {
    // The queue-mode group reads two queues: caught up on one, an old message pending (and leased) on the other.
    const caughtUp = uniqueName('cli-gs-a');
    const behind = uniqueName('cli-gs-b');
    await pushN(caughtUp, 2);
    expect((await b.http('GET', `/api/v1/pop/queue/${caughtUp}?batch=2&autoAck=true`)).body.messages).toHaveLength(2);
    await pushN(behind, 3);
    expect((await b.http('GET', `/api/v1/pop/queue/${behind}?batch=1`)).body.messages).toHaveLength(1);
    await b.sql.query(`update queen.messages m set created_at = m.created_at - interval '2 minutes' from queen.partitions p where p.id = m.partition_id and p.queue_name = $1`, [behind]);
    await b.ctx.totals.flush();
    const rows = async (queue: string) => (await run(['groups', 'list', '--queue', queue])).rows.filter((r: any) => r.group === '__QUEUE_MODE__');
    // The listing totals follow writes asynchronously: read until both rows are current.
    const want = (r: any[], lag: number, state: string) => r.length === 1 && r[0].lag === lag && r[0].state === state;
    await eventually(async () => want(await rows(caughtUp), 0, 'Stable') && want(await rows(behind), 3, 'Lagging'), 10000, 200).catch(async () => {
      expect([await rows(caughtUp), await rows(behind)]).toEqual('rows that never became current');
    });
    expect(await rows(caughtUp)).toEqual([{ group: '__QUEUE_MODE__', queue: caughtUp, lag: 0, lagSeconds: 0, members: 0, state: 'Stable' }]);
    expect(await rows(behind)).toEqual([{ group: '__QUEUE_MODE__', queue: behind, lag: 3, lagSeconds: expect.any(Number), members: 1, state: 'Lagging' }]);
    expect((await rows(behind))[0].lagSeconds).toBeGreaterThanOrEqual(119);
    // The whole group's state is still there, once per group, in the route's answer.
    const group = (await b.http('GET', '/api/v1/consumer-groups?search=__QUEUE_MODE__')).body.find((g: any) => g.name === '__QUEUE_MODE__');
    expect(group.state).toBe('Lagging');
    expect(group.queues.filter((q: any) => q.queue === caughtUp || q.queue === behind).map((q: any) => [q.queue, q.state, q.members])).toEqual(
      [[caughtUp, 'Stable', 0], [behind, 'Lagging', 1]].sort((x, y) => (x[0]! < y[0]! ? -1 : 1)),
    );
  });

  it('groups list shows lag in messages and seconds; groups show; groups seek moves the cursor', async () => {
    const q = uniqueName('cli-g');
    await pushN(q, 5);
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}?consumerGroup=workers&batch=2`);
    const acks = popped.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId }));
    await b.http('POST', '/api/v1/ack/batch', { consumerGroup: 'workers', acknowledgments: acks });
    const list = await run(['groups', 'list', '--queue', q]);
    expect(list.code).toBe(0);
    expect(list.rows).toEqual([{ group: 'workers', queue: q, lag: 3, lagSeconds: expect.any(Number), members: 0, state: expect.any(String) }]);
    const table = await text(['groups', 'list', '--queue', q]);
    expect(table.stdout).toMatch(/^group\s+queue\s+lag\s+lagSeconds\s+members\s+state\n/);
    expect(table.stdout).toMatch(new RegExp(`\\nworkers\\s+${q}\\s+3\\s`));

    const detail = await run(['groups', 'show', 'workers', '--queue', q]);
    expect(detail.rows).toMatchObject([{ queue: q, partition: 'Default', cursor: '2', headOffset: '5', lag: 3 }]);

    const seek = await run(['groups', 'seek', 'workers', q, '--to-end']);
    expect(seek.code).toBe(0);
    expect(seek.rows[0]).toMatchObject({ success: true, partitionsUpdated: 1 });
    expect((await run(['groups', 'list', '--queue', q])).rows[0].lag).toBe(0);
    const back = await run(['groups', 'seek', 'workers', q, '--partition', 'Default', '--offset', '1']);
    expect(back.rows[0]).toMatchObject({ success: true, cursorMovedTo: '1' });
    expect((await run(['groups', 'list', '--queue', q])).rows[0].lag).toBe(4);
    expect((await run(['groups', 'seek', 'workers', q, '--offset', '1'])).code).toBe(2);
    expect((await run(['groups', 'seek', 'workers', uniqueName('nope'), '--to-end'])).code).toBe(3);
    expect((await run(['groups', 'show', uniqueName('nobody')])).code).toBe(3);
  });

  it('dlq list, requeue and delete; ids without an entry exit 3', async () => {
    const q = uniqueName('cli-dlq');
    await pushN(q, 2);
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}?batch=2`);
    for (const m of popped.body.messages) {
      await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq', error: `bad ${m.data.i}` });
    }
    const list = await run(['dlq', 'list', '--queue', q]);
    expect(list.code).toBe(0);
    expect(list.rows.map((r) => r.errorMessage).sort()).toEqual(['bad 0', 'bad 1']);
    const [first, second] = popped.body.messages.map((m: any) => m.id);

    const requeue = await run(['dlq', 'requeue', first]);
    expect(requeue.code).toBe(0);
    expect(requeue.rows).toMatchObject([{ id: first, success: true, queue: q, offset: '3', entriesDeleted: 1 }]);
    const again = await b.http('GET', `/api/v1/pop/queue/${q}`);
    expect(again.body.messages[0]).toMatchObject({ data: { i: 0 }, offset: '3' });

    const missing = randomUUID();
    const del = await run(['dlq', 'delete', second, missing]);
    expect(del.code).toBe(3);
    expect(del.rows).toMatchObject([{ id: second, success: true }, { id: missing, success: false, code: 'MESSAGE_NOT_FOUND' }]);
    expect(del.stderr).toContain('1 of 2 id(s) had no DLQ entry');
    expect((await run(['dlq', 'list', '--queue', q])).rows).toEqual([]);
    expect((await run(['dlq', 'requeue', 'not-a-uuid'])).code).toBe(1);
  });

  it('dlq requeue in bulk: by queue and error text, page by page into another queue, with a progress line; run again it finds nothing', async () => {
    const q = uniqueName('cli-replay');
    const target = uniqueName('cli-replay-to');
    await pushN(q, 4);
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}?batch=4`);
    for (const m of popped.body.messages) {
      await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq', error: m.data.i === 3 ? 'other' : `Timeout ${m.data.i}` });
    }
    const res = await run(['dlq', 'requeue', '--queue', q, '--error', 'timeout', '--page', '2', '--to-queue', target]);
    expect(res.code).toBe(0);
    expect(res.rows.map((r) => [r.status, r.queue, r.offset])).toEqual([
      ['queued', target, '1'],
      ['queued', target, '2'],
      ['queued', target, '3'],
    ]);
    expect(res.stderr.trim().split('\n').at(-1)).toBe('requeued 3 (3 queued, 0 duplicate), 0 entries left');
    const moved = await b.http('GET', `/api/v1/pop/queue/${target}?batch=10`);
    expect(moved.body.messages.map((m: any) => m.data.i).sort()).toEqual([0, 1, 2]);
    expect((await run(['dlq', 'list', '--queue', q])).rows.map((r) => r.errorMessage)).toEqual(['other']);
    const again = await run(['dlq', 'requeue', '--queue', q, '--error', 'timeout']);
    expect([again.code, again.rows, again.stderr.trim()]).toEqual([0, [], 'requeued 0 (0 queued, 0 duplicate), 0 entries left']);
    expect((await run(['dlq', 'requeue'])).code).toBe(2);
  });

  it('streams list, state (by partition name, all partitions, prefix) and drop', async () => {
    const src = uniqueName('cli-src');
    const name = uniqueName('cli-query');
    await pushN(src, 1, 'pa');
    await pushN(src, 1, 'pb');
    const reg = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h' });
    const detail = await b.http('GET', `/api/v1/resources/queues/${src}`);
    for (const p of detail.body.partitions) {
      const res = await b.http('POST', '/streams/v1/cycle', {
        query_id: reg.body.query_id,
        partition_id: p.id,
        state_ops: [
          { type: 'upsert', key: `w:${p.name}:1`, value: { acc: 1 } },
          { type: 'upsert', key: `x:${p.name}`, value: { acc: 2 } },
        ],
        push_items: [],
        ack: null,
      });
      expect(res.body.success).toBe(true);
    }
    const list = await run(['streams', 'list']);
    expect(list.rows.find((r) => r.name === name)).toMatchObject({ source_queue: src, state_rows: 4, query_id: reg.body.query_id });

    const one = await run(['streams', 'state', name, 'pa']);
    expect(one.code).toBe(0);
    expect(one.rows.map((r) => [r.partition, r.key, r.value])).toEqual([
      ['pa', 'w:pa:1', { acc: 1 }],
      ['pa', 'x:pa', { acc: 2 }],
    ]);
    // The runner's bookkeeping (here an event-time watermark) only on request.
    const pa = detail.body.partitions.find((p: any) => p.name === 'pa');
    expect((await b.http('POST', '/streams/v1/cycle', { query_id: reg.body.query_id, partition_id: pa.id, state_ops: [{ type: 'upsert', key: '__wm__', value: { eventTimeMs: 1 } }], ack: null })).body.success).toBe(true);
    expect((await run(['streams', 'state', name, 'pa'])).rows.map((r) => r.key)).toEqual(['w:pa:1', 'x:pa']);
    expect((await run(['streams', 'state', name, 'pa', '--bookkeeping'])).rows.map((r) => r.key)).toEqual(['__wm__', 'w:pa:1', 'x:pa']);
    const all = await run(['streams', 'state', reg.body.query_id, '--prefix', 'w:']);
    expect(all.rows.map((r) => r.key).sort()).toEqual(['w:pa:1', 'w:pb:1']);
    expect((await run(['streams', 'state', name, '--limit', '3'])).rows).toHaveLength(3);
    expect((await run(['streams', 'state', name, 'nope'])).code).toBe(3);
    expect((await run(['streams', 'state', uniqueName('noquery')])).code).toBe(3);

    expect((await run(['streams', 'drop', name])).code).toBe(2);
    const drop = await run(['streams', 'drop', name, '--yes']);
    expect(drop.rows[0]).toMatchObject({ success: true, name, state_rows_deleted: 5 }); // the four rows and pa's __wm__
    expect((await run(['streams', 'drop', name, '--yes'])).code).toBe(3);
  });

  it('streams plan: the last proposed version against the registered one, a table on a terminal and JSON with --json', async () => {
    const src = uniqueName('cli-plan-src');
    const name = uniqueName('cli-plan');
    await pushN(src, 1, 'pa');
    const stage = (name: string, kind: string, stateful: boolean, feeds: boolean, state: string | null, code: string) =>
      ({ name, kind, stateful, feeds_state: feeds, state_hash: state, code_hash: code });
    const v1 = [stage('enrich', 'map', false, true, null, 'c1'), stage('window', 'window:tumbling', true, false, 's60', 'w'), stage('reducer', 'aggregate', true, false, 'r', 'r'), stage('sink', 'sink:queue', false, false, null, 'k')];
    const reg = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h1', stages: v1 });
    expect(reg.status).toBe(200);
    const detail = await b.http('GET', `/api/v1/resources/queues/${src}`);
    await b.http('POST', '/streams/v1/cycle', { query_id: reg.body.query_id, partition_id: detail.body.partitions[0].id, state_ops: [{ type: 'upsert', key: 'w:1', value: { acc: 1 } }, { type: 'upsert', key: '__wm__', value: { eventTimeMs: Date.parse('2026-01-05T10:00:00.000Z') } }], ack: null });
    expect((await run(['streams', 'plan', name])).code).toBe(3); // nothing proposed yet

    // A wider window, refused at register: it becomes the proposed version.
    const v2 = [v1[0]!, stage('window', 'window:tumbling', true, false, 's120', 'w'), v1[2]!, v1[3]!];
    const refused = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h2', stages: v2 });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('CONFIG_HASH_MISMATCH');
    const table = await text(['streams', 'plan', name]);
    expect(table.code).toBe(0);
    // Two rows: the window and the partition's watermark.
    expect(table.stdout).toMatch(/window\s+window:tumbling\s+state-incompatible\s+2\s+drop/);
    expect(table.stdout).toContain('verdict: blocked');
    expect(table.stdout).toContain('blocking: window');
    const lag = await run(['streams', 'lag', name]);
    expect(lag.rows).toEqual([expect.objectContaining({ partition: 'pa', cursor: '0', head_offset: '1', lag: 1, state_rows: 2, watermark: Date.parse('2026-01-05T10:00:00.000Z') })]);
    expect((await text(['streams', 'lag', name])).stdout).toMatch(/pa\s+0\s+1\s+1\s+\d+s.*2026-01-05T10:00:00.000Z/);
    const json = await run(['streams', 'plan', name, '--json']);
    expect(json.rows[0]).toMatchObject({ name, registered_config_hash: 'h1', config_hash: 'h2', state_rows: 2, plan: { verdict: 'blocked', blocking: ['window'] } });
    expect(json.rows[0].plan.stages.map((s: any) => s.change)).toEqual(['unchanged', 'state-incompatible', 'unchanged', 'unchanged']);
  });

  it('kv set, get, list and delete; missing keys exit 3, version conflicts exit 4', async () => {
    const ns = uniqueName('clins');
    const set = await run(['kv', 'set', ns, 'a', '{"n":1}', '--ttl', '3600']);
    expect(set.code).toBe(0);
    expect(set.rows[0]).toMatchObject({ key: 'a', value: { n: 1 }, created: true });
    const version = set.rows[0].version;
    expect((await run(['kv', 'set', ns, 'a', '2', '--expected-version', String(version + 1000)])).code).toBe(4);
    await run(['kv', 'set', ns, 'b', '"two"']);
    await run(['kv', 'set', ns, 'b/c', 'true']);
    const get = await run(['kv', 'get', ns, 'b/c']);
    expect(get.rows[0]).toMatchObject({ namespace: ns, key: 'b/c', value: true });
    const list = await run(['kv', 'list', ns]);
    expect(list.rows.map((r) => r.key)).toEqual(['a', 'b', 'b/c']);
    const page = await run(['kv', 'list', ns, '--prefix', 'b', '--limit', '1']);
    expect(page.rows.map((r) => r.key)).toEqual(['b']);
    expect(page.stderr).toContain('more keys follow: --after "b"');
    expect((await run(['kv', 'delete', ns, 'b'])).code).toBe(0);
    expect((await run(['kv', 'delete', ns, 'b'])).code).toBe(3);
    const missing = await run(['kv', 'get', ns, 'b']);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain('KV_NOT_FOUND');
  });

  it('schedules add, list (JSON lines, or a table on a terminal) and delete; a bad cron exits 1 with its code, a missing schedule 3', async () => {
    const name = uniqueName('clisched');
    const q = uniqueName('clischedq');
    const add = await run(['schedules', 'add', name, '0 6 * * *', q, '{"report":"daily"}', '--tz', 'Asia/Kolkata', '--missed', 'skip', '--partition', 'p1']);
    expect(add.code).toBe(0);
    expect(add.rows[0]).toMatchObject({ name, cron: '0 6 * * *', timeZone: 'Asia/Kolkata', queue: q, partition: 'p1', missed: 'skip', payload: { report: 'daily' }, status: 'created' });
    expect(add.rows[0].nextFireAt).toMatch(/T00:30:00\.000000Z$/);
    const list = await run(['schedules', 'list']);
    expect(list.rows.find((r) => r.name === name)).toMatchObject({ queue: q, nextFireAt: add.rows[0].nextFireAt });
    const table = await run(['schedules', 'list'], { tty: true });
    expect(table.stdout).toMatch(/name\s+cron\s+timeZone\s+queue/);
    expect(table.stdout).toContain(name);
    const bad = await run(['schedules', 'add', uniqueName('clibad'), 'not a cron', q]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('SCHEDULE_INVALID_CRON');
    expect((await run(['schedules', 'add', name, '* * * * *', q, '--missed', 'most'])).code).toBe(2);
    expect((await run(['schedules', 'delete', name])).code).toBe(0);
    expect((await run(['schedules', 'delete', name])).code).toBe(3);
  });

  it('tail uses a throw-away group from now on, leaves queue mode alone and deletes its group when stopped', async () => {
    const q = uniqueName('cli-tail');
    await pushN(q, 1); // before the tail: not shown
    const stop = new AbortController();
    const { io, out } = capture({ signal: stop.signal });
    const tailing = main(['tail', q], io);
    const group = await eventually(async () => {
      const { rows } = await b.sql.query(`select s.consumer_group from queen.subscriptions s join queen.queues q on q.id = s.queue_id where q.name = $1`, [q]);
      return rows[0]?.consumer_group as string | undefined;
    }, 10000);
    expect(group).toMatch(/^queen-tail-[0-9a-f]{8}$/);
    await pushN(q, 2);
    await eventually(async () => out.stdout.split('\n').filter(Boolean).length === 2, 10000);
    stop.abort();
    expect(await tailing).toBe(0);
    expect(out.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).offset)).toEqual(['2', '3']);
    // Workers in queue mode still get every message; the tail's group is gone.
    const workers = await b.http('GET', `/api/v1/pop/queue/${q}?batch=10`);
    expect(workers.body.messages.map((m: any) => m.offset)).toEqual(['1', '2', '3']);
    const { rows } = await b.sql.query(`select count(*)::int as n from queen.cursors where consumer_group = $1`, [group]);
    expect(rows).toEqual([{ n: 0 }]);

    const queueMode = await run(['tail', q, '--group', '__QUEUE_MODE__']);
    expect(queueMode.code).toBe(2);
    expect(queueMode.stderr).toContain('--ack');
  });

  it('listings are read page by page until a short page', async () => {
    const seen: number[] = [];
    const items = await allPages(async ({ limit, offset }) => {
      seen.push(offset);
      return Array.from({ length: Math.max(0, Math.min(limit, 2 * PAGE + 3 - offset)) }, (_, i) => offset + i);
    });
    expect(seen).toEqual([0, PAGE, 2 * PAGE]);
    expect(items).toHaveLength(2 * PAGE + 3);
    expect(items.at(-1)).toBe(2 * PAGE + 2);
  });

  it('bulk push from stdin reports progress on stderr', async () => {
    const q = uniqueName('cli-bulk');
    const lines = Array.from({ length: 1200 }, (_, i) => JSON.stringify({ i })).join('\n');
    const res = await run(['push', q], { stdin: lines });
    expect(res.code).toBe(0);
    expect(res.rows).toHaveLength(1200);
    expect(res.stderr).toContain('pushed 500 message(s)…');
    expect(res.stderr.trimEnd().split('\n').at(-1)).toBe(`pushed 1200 message(s) to ${q}`);
  });

  it('npx queen and npm exec queen work from the repository root (the bin is a tracked file, linked before any build)', async () => {
    const bin = cliPackage.bin.queen as string;
    expect(bin.startsWith('./dist/')).toBe(false);
    const { stdout: tracked } = await promisify(execFile)('git', ['ls-files', '--error-unmatch', `packages/cli/${bin.replace(/^\.\//, '')}`], { cwd: repo });
    expect(tracked.trim()).toBe(`packages/cli/${bin.replace(/^\.\//, '')}`);
    const link = `${repo}node_modules/.bin/queen`;
    expect(existsSync(link)).toBe(true);
    expect(realpathSync(link)).toBe(realpathSync(`${repo}packages/cli/${bin}`));
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
    const npx = await promisify(execFile)('npx', ['--no-install', 'queen', '--version'], { cwd: repo, env, timeout: 60000 });
    expect(npx.stdout).toBe(`${cliPackage.version}\n`);
    const exec = await promisify(execFile)('npm', ['exec', '--no', '--', 'queen', 'queues', 'list', '--json', '--url', b.url], { cwd: repo, env, timeout: 60000 });
    expect(exec.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).name).length).toBeGreaterThan(0);
  });
});
