import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestJson, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Bad input on the log routes (SCENARIOS X*): the stated 4xx with its code,
// JSON always, and nothing changed.

let b: TestBroker;
let small: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
  small = await startTestBroker({ databaseUrl: b.databaseUrl, config: { maxBodyBytes: 4096 } });
});
afterAll(async () => {
  await small?.stop();
  await b?.stop();
});

const fields = (body: any) => (body.details as { field: string }[]).map((d) => d.field);

/** Counts that must not move when a request is rejected. */
async function footprint() {
  const { rows } = await b.sql.query(`select
      (select count(*)::int from queen.queues) as queues,
      (select count(*)::int from queen.partitions) as partitions,
      (select count(*)::int from queen.messages) as messages,
      (select count(*)::int from queen.cursors) as cursors,
      (select count(*)::int from queen.cursors where lease_id is not null) as leases,
      (select count(*)::int from queen.subscriptions) as subscriptions,
      (select count(*)::int from queen.failures) as failures,
      (select count(*)::int from queen.dlq) as dlq,
      (select coalesce(sum(head_offset), 0)::int from queen.partitions) as heads,
      (select coalesce(sum(cursor_offset), 0)::int from queen.cursors) as cursor_sum`);
  return rows[0];
}

describe('bad input', () => {
  it('X1 malformed JSON answers 400 INVALID_JSON and writes nothing', async () => {
    const q = uniqueName('x1');
    const before = await footprint();
    for (const path of ['/api/v1/push', '/api/v1/ack', '/api/v1/ack/batch', '/api/v1/lease/0190a0a0-0000-7000-8000-000000000000/extend']) {
      const r = await b.http('POST', path, `{"items":[{"queue":"${q}"`);
      expect(r.status, path).toBe(400);
      expect(r.body, path).toMatchObject({ code: 'INVALID_JSON', error: expect.any(String) });
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    }
    expect((await b.http('GET', `/api/v1/resources/queues/${q}`)).status).toBe(404);
    expect(await footprint()).toEqual(before);
  });

  it('X2 push validation names every offending field and writes no item', async () => {
    const q = uniqueName('x2');
    const before = await footprint();
    const r = await b.http('POST', '/api/v1/push', {
      items: [
        { queue: q, payload: 0 },
        { queue: 5, payload: 1 },
        { queue: q, partition: {}, payload: 2 },
        { queue: q, traceId: 'abc', payload: 3 },
        { queue: q, payload: 4 },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('VALIDATION_FAILED');
    expect(fields(r.body).sort()).toEqual(['body.items[1].queue', 'body.items[2].partition', 'body.items[3].traceId']);
    for (const d of r.body.details) expect(typeof d.message).toBe('string');
    expect((await b.http('GET', `/api/v1/resources/queues/${q}`)).status).toBe(404);

    for (const body of [[], {}, { items: 'x' }, { items: null }, 'null', '5', '"s"']) {
      const x = await b.http('POST', '/api/v1/push', body);
      expect(x.status, JSON.stringify(body)).toBe(400);
      expect(x.body.code).toBe('VALIDATION_FAILED');
    }
    // Queue names: "/", control characters, surrounding spaces, over 255 chars.
    for (const queue of ['a/b', 'a\u0001b', ' padded', 'x'.repeat(256), '']) {
      const x = await b.http('POST', '/api/v1/push', { items: [{ queue }] });
      expect(x.status, JSON.stringify(queue)).toBe(400);
      expect(fields(x.body)).toEqual(['body.items[0].queue']);
    }
    expect(await footprint()).toEqual(before);
  });

  it('X2 more items than QUEEN_MAX_PUSH_ITEMS is a 400', async () => {
    const limited = await startTestBroker({ databaseUrl: b.databaseUrl, config: { maxPushItems: 3 } });
    try {
      const before = await footprint();
      const q = uniqueName('x2max');
      const r = await limited.http('POST', '/api/v1/push', { items: Array.from({ length: 4 }, () => ({ queue: q })) });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ field: 'body.items' }] });
      expect(await footprint()).toEqual(before);
    } finally {
      await limited.stop();
    }
  });

  it('X3 a body over QUEEN_MAX_BODY_BYTES answers 413 and the next request succeeds', async () => {
    const q = uniqueName('x3');
    const ok = await small.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 'first' }] });
    expect(ok.status).toBe(201);
    const before = await footprint();
    const base = JSON.stringify({ items: [{ queue: q, payload: '' }] });
    const body = JSON.stringify({ items: [{ queue: q, payload: 'x'.repeat(4096 + 1 - base.length) }] });
    expect(Buffer.byteLength(body)).toBe(4097);
    const r = await small.http('POST', '/api/v1/push', body);
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    expect(await footprint()).toEqual(before);
    const next = await small.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 'second' }] });
    expect(next.status).toBe(201);
    expect(next.body[0].offset).toBe('2');
  });

  it('X3 a chunked body without a declared length is cut off at the limit', async () => {
    const q = uniqueName('x3chunk');
    const chunk = JSON.stringify({ items: [{ queue: q, payload: 'y'.repeat(8000) }] });
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(chunk));
        controller.close();
      },
    });
    const res = await fetch(`${small.url}/api/v1/push`, { method: 'POST', body: stream, duplex: 'half', headers: { 'content-type': 'application/json' } } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    expect((await b.http('GET', `/api/v1/resources/queues/${q}`)).status).toBe(404);
  });

  it('X4 unknown routes answer 404 ROUTE_NOT_FOUND with a JSON body', async () => {
    for (const [method, path] of [
      ['GET', '/api/v1/nope'],
      ['PUT', '/api/v1/push'],
      ['GET', '/api/v1/pop?namespace=x'],
      ['POST', '/api/v1/traces'],
      ['GET', '/api/v1/messages'],
      ['DELETE', '/api/v1/push'],
    ] as const) {
      const r = await b.http(method, path, method === 'GET' || method === 'DELETE' ? undefined : {});
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.body).toMatchObject({ code: 'ROUTE_NOT_FOUND', error: expect.any(String) });
    }
  });

  it('X6 non-UUID ids are 400 naming the field, never 500', async () => {
    const before = await footprint();
    const ack = await b.http('POST', '/api/v1/ack', { transactionId: 't', partitionId: 'abc' });
    expect(ack.status).toBe(400);
    expect(fields(ack.body)).toEqual(['body.partitionId']);
    const batch = await b.http('POST', '/api/v1/ack/batch', { acknowledgments: [{ transactionId: 't', partitionId: 'abc', leaseId: 'nope' }] });
    expect(batch.status).toBe(400);
    expect(fields(batch.body).sort()).toEqual(['body.acknowledgments[0].leaseId', 'body.acknowledgments[0].partitionId']);
    const ext = await b.http('POST', '/api/v1/lease/xyz/extend', {});
    expect(ext.status).toBe(400);
    expect(fields(ext.body)).toEqual(['params.leaseId']);
    const trace = await b.http('POST', '/api/v1/push', { items: [{ queue: uniqueName('x6'), traceId: 'not-a-uuid' }] });
    expect(fields(trace.body)).toEqual(['body.items[0].traceId']);
    for (const seconds of [0, -1, 1.5, 'ten', 86401]) {
      const x = await b.http('POST', `/api/v1/lease/${crypto.randomUUID()}/extend`, { seconds });
      expect(x.status, String(seconds)).toBe(400);
      expect(fields(x.body)).toEqual(['body.seconds']);
    }
    expect(await footprint()).toEqual(before);
  });

  it('X6 ack bodies: bad status, empty or oversized batches are 400 and apply nothing', async () => {
    const q = uniqueName('x6ack');
    await b.http('POST', '/api/v1/push', { items: [{ queue: q }, { queue: q }] });
    const pop = await b.http('GET', `/api/v1/pop/queue/${q}?batch=2`);
    const [m1, m2] = pop.body.messages;
    const before = await footprint();
    const bad = await b.http('POST', '/api/v1/ack', { transactionId: m1.transactionId, partitionId: m1.partitionId, status: 'done' });
    expect(bad.status).toBe(400);
    expect(fields(bad.body)).toEqual(['body.status']);
    const mixed = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: [
        { transactionId: m1.transactionId, partitionId: m1.partitionId, leaseId: m1.leaseId },
        { transactionId: m2.transactionId, leaseId: m2.leaseId },
      ],
    });
    expect(mixed.status).toBe(400);
    expect(fields(mixed.body)).toEqual(['body.acknowledgments[1].partitionId']);
    expect((await b.http('POST', '/api/v1/ack/batch', { acknowledgments: [] })).status).toBe(400);
    expect((await b.http('POST', '/api/v1/ack/batch', {})).status).toBe(400);
    expect(await footprint()).toEqual(before);
  });

  it('X7 bad batch or partitions are 400 on query.batch / query.partitions and take no lease', async () => {
    const q = uniqueName('x7');
    await b.http('POST', '/api/v1/push', { items: [{ queue: q }] });
    const before = await footprint();
    for (const batch of ['-1', '0', '1.5', 'ten', '10001', '']) {
      for (const path of [`/api/v1/pop/queue/${q}`, `/api/v1/pop/queue/${q}/partition/Default`]) {
        const r = await b.http('GET', `${path}?batch=${batch}`);
        expect(r.status, `batch=${batch}`).toBe(400);
        expect(r.body.code).toBe('VALIDATION_FAILED');
        expect(fields(r.body)).toEqual(['query.batch']);
      }
    }
    for (const partitions of ['0', '1001', 'x']) {
      const r = await b.http('GET', `/api/v1/pop/queue/${q}?partitions=${partitions}`);
      expect(r.status).toBe(400);
      expect(fields(r.body)).toEqual(['query.partitions']);
    }
    expect(await footprint()).toEqual(before);
    // The message is still there for a valid pop.
    expect((await b.http('GET', `/api/v1/pop/queue/${q}?batch=1`)).status).toBe(200);
  });

  it('X8 bad wait, timeout and subscription parameters are 400 and register no group', async () => {
    const q = uniqueName('x8');
    await b.http('POST', '/api/v1/push', { items: [{ queue: q }] });
    const before = await footprint();
    for (const [qs, field] of [
      ['timeout=86400000&wait=true', 'query.timeout'],
      ['timeout=-1&wait=true', 'query.timeout'],
      ['wait=maybe', 'query.wait'],
      ['autoAck=yes', 'query.autoAck'],
      ['subscriptionMode=earliest', 'query.subscriptionMode'],
      ['subscriptionFrom=notadate', 'query.subscriptionFrom'],
      ['subscriptionFrom=2026-01-05T10:00:00', 'query.subscriptionFrom'],
    ] as const) {
      const t0 = Date.now();
      const r = await b.http('GET', `/api/v1/pop/queue/${q}?consumerGroup=x8group&${qs}`);
      expect(r.status, qs).toBe(400);
      expect(fields(r.body), qs).toEqual([field]);
      expect(Date.now() - t0).toBeLessThan(1000);
    }
    expect((await b.http('GET', '/api/v1/consumer-groups/x8group')).status).toBe(404);
    expect(await footprint()).toEqual(before);
  });

  it('JSON text PostgreSQL cannot store (U+0000, unpaired surrogates) is a 400 naming the field, never a 500', async () => {
    const q = uniqueName('x-nul');
    const before = await footprint();
    const cases: [string, string[]][] = [
      [`{"items":[{"queue":"${q}","payload":"a\\u0000b"}]}`, ['body.items[0].payload']],
      [`{"items":[{"queue":"${q}","payload":{"k\\u0000":1}}]}`, ['body.items[0].payload']],
      [`{"items":[{"queue":"${q}","payload":1},{"queue":"${q}","payload":["ok","\\ud800"]}]}`, ['body.items[1].payload[1]']],
      [`{"items":[{"queue":"${q}","payload":"\\udc00 tail"}]}`, ['body.items[0].payload']],
    ];
    for (const [text, expected] of cases) {
      const r = await b.http('POST', '/api/v1/push', text);
      expect(r.status, text).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(fields(r.body)).toEqual(expected);
    }
    const ack = await b.http('POST', '/api/v1/ack', `{"transactionId":"t","partitionId":"${crypto.randomUUID()}","error":"x\\u0000"}`);
    expect(ack.status).toBe(400);
    expect(fields(ack.body)).toEqual(['body.error']);
    expect(await footprint()).toEqual(before);
    // Escaped backslashes and real surrogate pairs are ordinary text.
    const fine = await b.http('POST', '/api/v1/push', `{"items":[{"queue":"${q}","payload":["\\\\u0000","\\ud83d\\ude00"]}]}`);
    expect(fine.status).toBe(201);
    const pop = await b.http('GET', `/api/v1/pop/queue/${q}`);
    expect(pop.body.messages[0].data).toEqual(['\\u0000', '😀']);
  });

  it('a body nested deeper than 1000 levels is a 400; 990 levels round-trip', async () => {
    const q = uniqueName('x-deep');
    const before = await footprint();
    for (const levels of [1001, 100_000]) {
      const r = await b.http('POST', '/api/v1/push', `{"items":[{"queue":"${q}","payload":${'['.repeat(levels)}${']'.repeat(levels)}}]}`);
      expect(r.status, String(levels)).toBe(400);
      expect(r.body).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ field: 'body' }] });
    }
    expect(await footprint()).toEqual(before);
    // Brackets inside strings are text, not nesting.
    const text = { s: '['.repeat(5000) };
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: text }] })).status).toBe(201);
    const deep = JSON.parse(`${'['.repeat(990)}"bottom"${']'.repeat(990)}`);
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: deep }] })).status).toBe(201);
    const pop = await b.http('GET', `/api/v1/pop/queue/${q}?batch=2`);
    expect(pop.body.messages.map((m: any) => m.data)).toEqual([text, deep]);
  });

  it('a JSON body that is not an object is a 400 even where every field is optional', async () => {
    for (const text of ['null', '[]', '5', '"x"', 'true']) {
      const r = await b.http('POST', `/api/v1/lease/${crypto.randomUUID()}/extend`, text);
      expect(r.status, text).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(fields(r.body)).toEqual(['body']);
    }
    // An empty body reads as {}.
    const empty = await b.http('POST', `/api/v1/lease/${crypto.randomUUID()}/extend`, '');
    expect(empty.status).toBe(200);
    expect(empty.body[0].code).toBe('LEASE_NOT_FOUND');
  });

  it('path segments are percent-decoded: a partition name may hold "/" and spaces', async () => {
    const q = uniqueName('x-dec');
    const partition = 'a/b c';
    const push = await b.http('POST', '/api/v1/push', { items: [{ queue: q, partition, payload: 1 }] });
    expect(push.status).toBe(201);
    const r = await requestJson(b.url, 'GET', `/api/v1/pop/queue/${q}/partition/${encodeURIComponent(partition)}`);
    expect(r.status).toBe(200);
    expect(r.body.messages[0].partition).toBe(partition);
  });
});
