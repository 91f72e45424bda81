// scratch (not committed): seeds a database like bench/scale.mjs and keeps it running.
import pg from 'pg';
import { writeFileSync } from 'node:fs';
import { spawnBroker, startDatabase } from './_lib.mjs';
const QUEUES = Number(process.argv[2] ?? 2000), BIG = Number(process.argv[3] ?? 50000);
const db = await startDatabase('prof');
const broker = await spawnBroker('prof', db.url);
const sql = new pg.Pool({ connectionString: db.url, max: 2 });
const push = async (items) => { const r = await fetch(`${broker.url}/api/v1/push`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ items }) }); if (r.status >= 400) throw new Error(await r.text()); };
const items = [];
for (let q = 0; q < QUEUES; q++) for (let p = 0; p < 10; p++) items.push({ queue: `q${q}`, partition: `p${p}`, payload: { q, p } });
for (let i = 0; i < items.length; i += 500) await push(items.slice(i, i + 500));
for (let i = 0; i < BIG; i += 500) await push(Array.from({ length: Math.min(500, BIG - i) }, (_, j) => ({ queue: 'big', partition: `p${i + j}`, payload: 0 })));
await sql.query(`insert into queen.cursors (partition_id, consumer_group, cursor_offset)
     select p.id, '__QUEUE_MODE__', p.head_offset from queen.partitions p where p.queue_name = 'big'
     on conflict (partition_id, consumer_group) do update set cursor_offset = excluded.cursor_offset, lease_id = null, lease_expires_at = null`);
await sql.end();
writeFileSync('/tmp/i31/db.json', JSON.stringify({ url: db.url, broker: broker.url }));
console.log(db.url, broker.url);
await new Promise((r) => process.on('SIGTERM', r));
await broker.stop(); await db.stop();
