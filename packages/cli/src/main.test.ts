import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, freshDatabase, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { main } from './main.js';
import type { CliIO } from './io.js';

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function capture(opts: { stdin?: string; tty?: boolean; env?: Record<string, string>; signal?: AbortSignal } = {}) {
  const out = { stdout: '', stderr: '' };
  const io: CliIO = {
    stdout: { write: (s: string) => (out.stdout += s), isTTY: opts.tty ?? false },
    stderr: { write: (s: string) => (out.stderr += s) },
    stdin: opts.stdin === undefined ? undefined : Object.assign(Readable.from([opts.stdin]), { isTTY: false }),
    env: opts.env ?? {},
    signal: opts.signal,
  };
  return { io, out };
}

async function run(argv: string[], opts: Parameters<typeof capture>[0] = {}): Promise<Run> {
  const { io, out } = capture(opts);
  const code = await main(argv, io);
  return { code, ...out };
}

const jsonLines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

describe('queen CLI', () => {
  it('push then pop --json --ack: output parses, messages in order, acked', async () => {
    const q = uniqueName('cli');
    const one = await run(['push', q, '{"a":1}', '--url', b.url, '--json', '--tx', 'first']);
    expect(one.code).toBe(0);
    expect(jsonLines(one.stdout)).toMatchObject([{ index: 0, status: 'queued', offset: '1', transaction_id: 'first', queueName: q }]);

    const many = await run(['push', q, '--url', b.url], { stdin: '{"a":2}\n\n"three"\n{"payload":{"a":4},"transactionId":"t4"}' });
    expect(many.code).toBe(0);
    // Piped stdout (not a TTY) gets JSON lines without --json; indexes count input lines.
    expect(jsonLines(many.stdout).map((r) => [r.index, r.offset, r.status])).toEqual([
      [0, '2', 'queued'],
      [1, '3', 'queued'],
      [2, '4', 'queued'],
    ]);

    const popped = await run(['pop', q, '--batch', '10', '--json', '--ack'], { env: { QUEEN_URL: b.url } });
    expect(popped.code).toBe(0);
    const messages = jsonLines(popped.stdout);
    expect(messages.map((m) => m.data)).toEqual([{ a: 1 }, { a: 2 }, 'three', { a: 4 }]);
    expect(messages.map((m) => m.offset)).toEqual(['1', '2', '3', '4']);
    expect(messages[3].transactionId).toBe('t4');

    const { rows } = await b.sql.query(
      `select c.cursor_offset::text as cursor, c.lease_id from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`,
      [q],
    );
    expect(rows).toEqual([{ cursor: '4', lease_id: null }]);

    const empty = await run(['pop', q, '--json', '--url', b.url]);
    expect(empty).toMatchObject({ code: 0, stdout: '' });
  });

  it('pop without --ack leaves the messages leased; --partition and --group are honoured', async () => {
    const q = uniqueName('cli-lease');
    expect((await run(['push', q, '"x"', '--partition', 'px', '--url', b.url])).code).toBe(0);
    const first = await run(['pop', q, '--partition', 'px', '--group', 'g1', '--json', '--url', b.url]);
    expect(jsonLines(first.stdout)).toMatchObject([{ data: 'x', partition: 'px', consumerGroup: 'g1' }]);
    // Still leased to g1; another group reads it independently.
    expect((await run(['pop', q, '--group', 'g1', '--json', '--url', b.url])).stdout).toBe('');
    expect(jsonLines((await run(['pop', q, '--group', 'g2', '--json', '--url', b.url])).stdout)).toHaveLength(1);
  });

  it('a terminal gets a table', async () => {
    const q = uniqueName('cli-tty');
    await run(['push', q, '{"hello":"world"}', '--url', b.url]);
    const res = await run(['pop', q, '--url', b.url, '--ack'], { tty: true });
    expect(res.code).toBe(0);
    const [header, row] = res.stdout.split('\n');
    expect(header).toMatch(/^offset\s+partition\s+transactionId\s+retryCount\s+createdAt\s+data$/);
    expect(row).toMatch(/^1\s+Default\s+\S+\s+0\s+\S+\s+\{"hello":"world"\}$/);
  });

  it('broker errors print the code and exit 1; usage mistakes exit 2', async () => {
    const bad = await run(['push', 'bad/queue', '1', '--url', b.url]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('VALIDATION_FAILED (HTTP 400)');
    expect(bad.stderr).toContain('body.items[0].queue');

    expect((await run(['push', 'q', '{not json', '--url', b.url])).code).toBe(2);
    expect((await run(['pop', 'q', '--batch', 'ten', '--url', b.url])).code).toBe(2);
    expect((await run(['pop', 'q', '--nope', '--url', b.url])).code).toBe(2);
    expect((await run(['frobnicate'])).code).toBe(2);
    expect((await run(['tail', 'q', '--from', 'later'])).code).toBe(2);
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: queen');
  });

  it('tail prints and acks every message until stopped', async () => {
    const q = uniqueName('cli-tail');
    const stop = new AbortController();
    const { io, out } = capture({ signal: stop.signal });
    const tailing = main(['tail', q, '--group', 'tailer', '--url', b.url], io);
    await run(['push', q, '--url', b.url], { stdin: '1\n2\n3\n' });
    await eventually(async () => jsonLines(out.stdout).length === 3, 15000);
    await run(['push', q, '4', '--url', b.url]);
    await eventually(async () => jsonLines(out.stdout).length === 4, 15000);
    stop.abort();
    expect(await tailing).toBe(0);
    expect(jsonLines(out.stdout).map((m) => m.data)).toEqual([1, 2, 3, 4]);
    await eventually(async () => {
      const { rows } = await b.sql.query(
        `select c.cursor_offset::text as cursor from queen.cursors c join queen.partitions p on p.id = c.partition_id
          where p.queue_name = $1 and c.consumer_group = 'tailer'`,
        [q],
      );
      return rows[0]?.cursor === '4';
    }, 5000);
  });

  it('migrate applies the schema once (the broker and the composed KV), then reports it up to date', async () => {
    const databaseUrl = await freshDatabase();
    const first = await run(['migrate'], { env: { DATABASE_URL: databaseUrl } });
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('applied broker/001_log.sql');
    expect(first.stdout).toContain('applied broker/002_delivery.sql');
    expect(first.stdout).toContain('applied kv/001_kv.sql');
    const second = await run(['migrate'], { env: { DATABASE_URL: databaseUrl } });
    expect(second).toMatchObject({ code: 0, stdout: 'schema up to date, nothing applied\n' });
  });

  it('dev serves the broker, KV routes included, until stopped', async () => {
    const databaseUrl = await freshDatabase();
    const stop = new AbortController();
    const { io, out } = capture({ env: { DATABASE_URL: databaseUrl, QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'warn' }, signal: stop.signal });
    const serving = main(['dev', '--port', '0'], io);
    const url = await eventually(async () => /listening on (http:\/\/\S+)/.exec(out.stdout)?.[1], 30000);
    const pushed = await run(['push', 'dev-q', '"hi"', '--url', url]);
    expect(jsonLines(pushed.stdout)[0]).toMatchObject({ status: 'queued', offset: '1' });
    const kv = await fetch(`${url}/api/v1/kv/dev-ns/k`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"value":7}' });
    expect(await kv.json()).toMatchObject({ value: 7, created: true });
    stop.abort();
    expect(await serving).toBe(0);
    const down = await run(['pop', 'dev-q', '--url', url]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/ECONNREFUSED/);
  });
});
