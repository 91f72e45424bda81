// The plain-SQL queue (_plain-sql.mjs) behind a bare node:http server: JSON in,
// JSON out, no framework, validation, auth or metrics. It prices the HTTP hop
// any broker pays (one request per push, pop and ack, in its own process), so
// the peers bench can say how much of the gap to plain SQL is the hop and how
// much is ours.
//
// Two floors in one server:
//   /push /pop /ack       the http floor: the plain queue's own small JSON
//                         (a pop answers offset, id and payload per message, an
//                         ack names the claim, neither answers per item);
//   /api/v1/push, /api/v1/pop/queue/:queue, /api/v1/ack[/batch]
//                         the wire floor: the same SQL work spoken in Queen's
//                         wire (the answers carry every field our broker's do),
//                         so @queen-mq/client drives it as it drives the
//                         broker. It prices the hop, Queen's wire format and the
//                         client together: what any Queen-compatible broker
//                         pays before its own semantics (dedup, retries,
//                         fences, DLQ, subscriptions, validation).
//   /metrics              queen_long_poll_waiting, the pops parked now (what
//                         bench/_quiet.mjs's parkedPops reads): bench/scale.mjs
//                         parks as many pops here as on the broker, the
//                         memory any node:http server pays for them.
// Env: DATABASE_URL, QUEEN_PORT, FLOOR_POOL, FLOOR_PARTITIONS, FLOOR_BATCH.
import { createServer } from 'node:http';
import pg from 'pg';
import { createPlainSchema, plainQueue, plainWireQueue } from './_plain-sql.mjs';

const sql = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.FLOOR_POOL ?? 10) });
await createPlainSchema(sql);
const plain = plainQueue(sql, { partitions: Number(process.env.FLOOR_PARTITIONS ?? 8), batch: Number(process.env.FLOOR_BATCH ?? 100) });
const wire = plainWireQueue(sql);

/**
 * Long-poll pops parked per queue, oldest first. A push wakes the oldest one
 * (which claims, or parks again if another pop got there first): waking all
 * would send every parked pop to PostgreSQL for one batch.
 */
const parked = new Map();
const wakeQueue = (queue) => {
  const set = parked.get(queue);
  if (set?.size) set.values().next().value();
};
let parkedCount = 0;
/** Until a push to `queue` wakes it, `ms` pass or the client goes (`res` closes). */
const parkUntil = (queue, ms, res) => new Promise((resolve) => {
  let set = parked.get(queue);
  if (!set) parked.set(queue, (set = new Set()));
  const timer = setTimeout(() => done(), ms);
  const done = () => {
    clearTimeout(timer);
    res.off('close', done);
    if (set.delete(done)) parkedCount -= 1;
    if (set.size === 0 && parked.get(queue) === set) parked.delete(queue);
    resolve();
  };
  set.add(done);
  parkedCount += 1;
  res.once('close', done);
});

const json = JSON.stringify;

/** POST /api/v1/push: items grouped by partition, one producer transaction each; a result per item. */
async function wirePush(body) {
  const groups = new Map();
  body.items.forEach((item, index) => {
    const key = `${item.queue}\u0000${item.partition ?? 'Default'}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { queue: item.queue, partition: item.partition ?? 'Default', indexes: [] }));
    g.indexes.push(index);
  });
  const out = new Array(body.items.length);
  for (const g of groups.values()) {
    const id = await wire.partitionId(g.queue, g.partition);
    const rows = await wire.append(id, g.indexes.map((i) => json(body.items[i].payload ?? null)));
    g.indexes.forEach((index, k) => {
      const r = rows[k];
      out[index] = `{"index":${index},"transaction_id":"${r.id}","status":"queued","message_id":"${r.id}","partition_id":"${id}","queueName":${json(g.queue)},"offset":"${r.msg_offset}","trace_id":null}`;
    });
    wakeQueue(g.queue);
  }
  return { status: 201, text: `[${out.join(',')}]` };
}

/** GET /api/v1/pop/queue/:queue: a claim, written as our broker writes a pop's answer; waits for a push when asked. */
async function wirePop(queue, query, res) {
  const group = query.get('consumerGroup') ?? '__QUEUE_MODE__';
  const batch = Number(query.get('batch') ?? 1);
  const deadline = Date.now() + (query.get('wait') === 'true' ? Number(query.get('timeout') ?? 30000) : 0);
  for (;;) {
    const rows = await wire.claim(queue, batch);
    if (rows.length > 0) {
      const first = rows[0];
      const { name } = wire.names(first.partition_id);
      const lease = first.lease_id;
      const shared = `","partitionId":"${first.partition_id}","partition":${json(name)},"queue":${json(queue)},"leaseId":"${lease}","consumerGroup":${json(group)}`;
      const messages = rows.map((r) => `{"id":"${r.id}","transactionId":"${r.id}","traceId":null,"traceparent":null,"data":${r.payload},"producerSub":null,"createdAt":"${r.created_at}${shared},"offset":"${r.msg_offset}","retryCount":0}`);
      return { status: 200, text: `{"success":true,"queue":${json(queue)},"partition":${json(name)},"partitionId":"${first.partition_id}","leaseId":"${lease}","consumerGroup":${json(group)},"partitionsClaimed":1,"messages":[${messages.join(',')}]}` };
    }
    const left = deadline - Date.now();
    if (left <= 0) return { status: 204, text: '' };
    if (res.destroyed) return { status: 204, text: '' };
    await parkUntil(queue, left, res);
  }
}

/** POST /api/v1/ack[/batch]: each partition's cursor to its last acked offset in one statement; a result per item. */
async function wireAck(items) {
  const last = new Map();
  for (const i of items) {
    const seen = last.get(i.partitionId);
    if (!seen || BigInt(i.offset) > BigInt(seen.offset)) last.set(i.partitionId, i);
  }
  const ends = [...last.values()];
  await wire.release(ends.map((i) => i.partitionId), ends.map((i) => i.offset), ends.map((i) => i.leaseId));
  const out = items.map((i, index) => {
    const { queue, name } = wire.names(i.partitionId) ?? { queue: null, name: null };
    return `{"index":${index},"transactionId":${json(i.transactionId)},"success":true,"error":null,"code":null,"queueName":${json(queue)},"partitionName":${json(name)},"leaseReleased":${last.get(i.partitionId) === i},"dlq":false,"offset":"${i.offset}","alreadyAcked":false}`;
  });
  return { status: 200, text: `[${out.join(',')}]` };
}

const routes = {
  '/setup': (b) => plain.setup(b.queue),
  '/push': (b) => plain.push(b.queue, b.partition, b.items),
  '/pop': (b) => plain.claim(b.queue),
  '/ack': (b) => plain.release(b),
};

/** The answer to one request: a route of the http floor ({status, text} from the wire floor's). */
async function answer(method, path, query, body, res) {
  if (method === 'GET' && path.startsWith('/api/v1/pop/queue/')) return wirePop(decodeURIComponent(path.slice('/api/v1/pop/queue/'.length)), query, res);
  if (path === '/api/v1/push') return wirePush(JSON.parse(body));
  if (path === '/api/v1/ack/batch') return wireAck(JSON.parse(body).acknowledgments);
  if (path === '/api/v1/ack') return wireAck([JSON.parse(body)]);
  const out = await routes[path](JSON.parse(body));
  return { status: 200, text: json(out ?? null) };
}

const server = createServer((req, res) => {
  if (req.url === '/ready') return res.end('ok');
  if (req.url === '/metrics') return res.end(`queen_long_poll_waiting ${parkedCount}\n`);
  const [path, qs] = req.url.split('?');
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => (body += chunk));
  req.on('end', async () => {
    try {
      const { status, text } = await answer(req.method, path, new URLSearchParams(qs ?? ''), body, res);
      res.writeHead(status, status === 204 ? {} : { 'content-type': 'application/json' }).end(text);
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
});
server.keepAliveTimeout = 60000;
server.listen(Number(process.env.QUEEN_PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => sql.end().then(() => process.exit(0))));
