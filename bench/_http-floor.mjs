// The plain-SQL queue (_plain-sql.mjs) behind a bare node:http server: JSON in,
// JSON out, no framework, validation, auth or metrics. It prices the HTTP hop
// any broker pays (one request per push, pop and ack, in its own process), so
// the peers bench can say how much of the gap to plain SQL is the hop and how
// much is ours. Env: DATABASE_URL, QUEEN_PORT, FLOOR_POOL, FLOOR_PARTITIONS, FLOOR_BATCH.
import { createServer } from 'node:http';
import pg from 'pg';
import { createPlainSchema, plainQueue } from './_plain-sql.mjs';

const sql = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.FLOOR_POOL ?? 10) });
await createPlainSchema(sql);
const plain = plainQueue(sql, { partitions: Number(process.env.FLOOR_PARTITIONS ?? 8), batch: Number(process.env.FLOOR_BATCH ?? 100) });

const routes = {
  '/setup': (b) => plain.setup(b.queue),
  '/push': (b) => plain.push(b.queue, b.partition, b.items),
  '/pop': (b) => plain.claim(b.queue),
  '/ack': (b) => plain.release(b),
};

const server = createServer((req, res) => {
  if (req.url === '/ready') return res.end('ok');
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => (body += chunk));
  req.on('end', async () => {
    try {
      const out = await routes[req.url](JSON.parse(body));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out ?? null));
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
});
server.keepAliveTimeout = 60000;
server.listen(Number(process.env.QUEEN_PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => sql.end().then(() => process.exit(0))));
