import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// The listing totals (listing-totals.ts, queen.listing_totals_refresh_v1):
// what the listings and /metrics show per queue and per (queue, group) is
// kept by recounting the partitions the routes wrote. Here: after a seeded
// random schedule of writes the totals equal a direct count over the
// partitions and cursors (written below, sharing nothing with the recount);
// a recount reads the partitions written, not their queue; nothing runs
// while nothing is written; another broker's writes show within
// QUEEN_LISTING_TOTALS_MS; an ack from outside the broker's routes shows
// once its lease has ended.

const INTERVAL_MS = 300;

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { listingTotalsMs: INTERVAL_MS } });
});
afterAll(async () => b?.stop());

/** Deterministic PRNG, so a failing schedule can be replayed from its seed. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/**
 * The model: every figure of queen.queue_totals and queen.group_totals for
 * the queues named `prefix*`, counted straight from the partitions, cursors,
 * messages and DLQ (the statements the listings ran before the totals).
 */
async function directCounts(broker: TestBroker, prefix: string) {
  const { rows: queues } = await broker.sql.query(
    `select q.name, count(p.id)::int as partitions,
            coalesce(sum(greatest(p.head_offset - greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1), 0)), 0)::bigint::text as depth,
            coalesce(sum(greatest(p.head_offset - p.first_offset + 1, 0)), 0)::bigint::text as retained,
            coalesce(sum(p.head_offset), 0)::bigint::text as pushed,
            (select count(*) from queen.dlq d join queen.partitions dp on dp.id = d.partition_id where dp.queue_id = q.id)::text as dlq,
            min((select m.created_at from queen.messages m
                  where m.partition_id = p.id and m.msg_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
                  order by m.msg_offset limit 1)) as oldest,
            max(p.last_activity) as last_activity
       from queen.queues q
       left join queen.partitions p on p.queue_id = q.id
       left join queen.cursors c on c.partition_id = p.id and c.consumer_group = '__QUEUE_MODE__'
      where q.name like $1 || '%' group by q.id, q.name order by q.name`,
    [prefix],
  );
  const { rows: groups } = await broker.sql.query(
    `select p.queue_name as queue, c.consumer_group as "group", count(*)::int as cursors,
            sum(greatest(p.head_offset - greatest(c.cursor_offset, p.first_offset - 1), 0))::bigint::text as lag,
            sum(greatest(p.head_offset - p.first_offset + 1, 0))::bigint::text as retained,
            count(*) filter (where p.head_offset > greatest(c.cursor_offset, p.first_offset - 1))::int as lagging,
            min((select m.created_at from queen.messages m
                  where m.partition_id = p.id and m.msg_offset > greatest(c.cursor_offset, p.first_offset - 1)
                  order by m.msg_offset limit 1)) as oldest,
            max(coalesce(c.last_acked_at, c.created_at)) as last_acked
       from queen.cursors c join queen.partitions p on p.id = c.partition_id
      where p.queue_name like $1 || '%' group by 1, 2 order by 1, 2`,
    [prefix],
  );
  return { queues, groups };
}

/** The same figures as the totals hold them. */
async function totals(broker: TestBroker, prefix: string) {
  const { rows: queues } = await broker.sql.query(
    `select queue_name as name, partitions, depth::text, retained::text, pushed::text, dlq::text, oldest_pending_at as oldest, last_activity
       from queen.queue_totals where queue_name like $1 || '%' order by queue_name`,
    [prefix],
  );
  const { rows: groups } = await broker.sql.query(
    `select queue_name as queue, consumer_group as "group", cursors, lag::text, retained::text, partitions_with_lag as lagging,
            oldest_pending_at as oldest, last_acked_at as last_acked
       from queen.group_totals where queue_name like $1 || '%' order by queue_name, consumer_group`,
    [prefix],
  );
  return { queues, groups };
}

/** Recount statements `broker` sends while `fn` runs. */
async function recountsWhile(broker: TestBroker, fn: () => Promise<void>): Promise<number> {
  const db = broker.ctx.db;
  let recounts = 0;
  const query = db.query.bind(db);
  db.query = ((text: string | { text: string }, values?: unknown[]) => {
    if ((typeof text === 'string' ? text : text.text).includes('listing_totals_refresh')) recounts++;
    return query(text as never, values);
  }) as typeof db.query;
  try {
    await fn();
  } finally {
    db.query = query;
  }
  return recounts;
}

const pushTo = (queue: string, partition: string, n: number, broker: TestBroker = b) =>
  broker.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, partition, payload: i })) });

describe('listing totals', () => {
  // A broker whose timer never fires here: every recount is the test's
  // flush, so a write whose route did not name its partitions shows.
  let m: TestBroker;
  beforeAll(async () => {
    m = await startTestBroker({ config: { listingTotalsMs: 600_000 } });
  });
  afterAll(async () => m?.stop());

  for (const seed of [31, 4242, 90210]) {
    it(`equal a direct count after a random schedule of writes (seed ${seed})`, async () => {
      const random = rng(seed);
      const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)]!;
      const prefix = uniqueName(`lt${seed}`);
      const queues = [0, 1, 2].map((i) => `${prefix}-${i}`);
      const partitions = ['a', 'b', 'c', 'd'];
      const groups = ['__QUEUE_MODE__', 'g1', 'g2'];
      const log: string[] = [];
      const leased: { group: string; msg: any }[] = [];
      // Every partition exists before the first pop: a wildcard pop makes a
      // group's cursors on every partition of the queue, counted by the
      // queue's whole recount that its first pop through a broker starts
      // (a partition made later is counted for the group from its next write).
      for (const queue of queues) for (const partition of partitions) await pushTo(queue, partition, 1, m);
      for (let step = 0; step < 120; step++) {
        const queue = pick(queues);
        const group = pick(groups);
        const groupQuery = group === '__QUEUE_MODE__' ? '' : `&consumerGroup=${group}`;
        const op = random();
        if (op < 0.3) {
          const partition = pick(partitions);
          const n = 1 + Math.floor(random() * 4);
          log.push(`push ${queue}/${partition} x${n}`);
          await pushTo(queue, partition, n, m);
        } else if (op < 0.48) {
          const batch = 1 + Math.floor(random() * 3);
          log.push(`pop ${queue} ${group} x${batch}`);
          const popped = await m.http('GET', `/api/v1/pop/queue/${queue}?batch=${batch}&wait=false${groupQuery}`);
          if (popped.status === 200) for (const msg of popped.body.messages) leased.push({ group, msg });
        } else if (op < 0.66) {
          // Acks of messages popped earlier (a recount may have run between): completed, failed or dlq.
          const status = pick(['completed', 'completed', 'failed', 'dlq']);
          const taken = leased.splice(Math.floor(random() * leased.length), 1 + Math.floor(random() * 2));
          log.push(`ack ${taken.length} ${status}`);
          for (const { group: g, msg } of taken) {
            await m.http('POST', '/api/v1/ack', {
              ...(g === '__QUEUE_MODE__' ? {} : { consumerGroup: g }),
              transactionId: msg.transactionId, partitionId: msg.partitionId, leaseId: msg.leaseId, status,
            });
          }
        } else if (op < 0.72) {
          const target = random() < 0.5 ? { toEnd: true } : { timestamp: '2000-01-01T00:00:00.000Z' };
          log.push(`seek ${queue} ${group} to ${JSON.stringify(target)}`);
          await m.http('POST', `/api/v1/consumer-groups/${encodeURIComponent(group)}/queues/${queue}/seek`, target);
        } else if (op < 0.76) {
          log.push(`delete group ${group} on ${queue}`);
          await m.http('DELETE', `/api/v1/consumer-groups/${encodeURIComponent(group)}/queues/${queue}`);
        } else if (op < 0.82) {
          const dlq = await m.http('GET', `/api/v1/dlq?queue=${queue}&limit=5`);
          const ids = (dlq.body.messages ?? []).map((d: any) => d.id).slice(0, 2);
          log.push(`dlq delete ${ids.length} of ${queue}`);
          if (ids.length) await m.http('POST', '/api/v1/dlq/delete', { ids });
        } else {
          // Recounted now (as a listing on this broker does), mid-schedule: later recounts build on it.
          log.push('recount');
          await m.ctx.totals.flush();
          continue;
        }
        if (step % 15 === 14) {
          await m.ctx.totals.flush();
          expect(await totals(m, prefix), `seed ${seed} after ${log.length} ops:\n${log.join('\n')}`).toEqual(await directCounts(m, prefix));
        }
      }
      await m.ctx.totals.flush();
      const direct = await directCounts(m, prefix);
      expect(direct.queues.length).toBe(queues.length);
      expect(await totals(m, prefix), `seed ${seed}:\n${log.join('\n')}`).toEqual(direct);
    }, 120_000);
  }

  it('a recount reads the partitions written, not the rest of their queue', async () => {
    const queue = uniqueName('lt-wide');
    const WIDE = 5_000;
    await b.sql.query('select queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(Array.from({ length: WIDE }, (_, p) => ({ queue, partition: `p${p}` })))]);
    // The first push counts the queue whole (it had no totals); the second is one partition's recount.
    await pushTo(queue, 'p0', 1);
    await b.ctx.totals.flush();
    const pushed = await pushTo(queue, 'p1', 3);
    // Each statement of the recount under auto_explain (plans sent back as notices): rows read per table.
    const c = new pg.Client({ connectionString: b.databaseUrl });
    await c.connect();
    const read: Record<string, number> = {};
    const walk = (node: Record<string, any>) => {
      const table = node['Relation Name'];
      if (table) read[table] = (read[table] ?? 0) + (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'];
      for (const child of node.Plans ?? []) walk(child);
    };
    c.on('notice', (n) => {
      const json = /plan:\n([\s\S]*)$/.exec(n.message ?? '')?.[1];
      if (json) walk(JSON.parse(json).Plan);
    });
    try {
      await c.query(`load 'auto_explain'`);
      for (const [k, v] of Object.entries({ log_min_duration: '0', log_analyze: 'on', log_timing: 'off', log_nested_statements: 'on', log_format: 'json', log_level: 'notice' })) {
        await c.query(`set auto_explain.${k} = '${v}'`);
      }
      await c.query('begin');
      await c.query('select count(*) from queen.listing_totals_refresh_v1($1::uuid[], $2::text[])', [[pushed.body[0].partition_id], []]);
      await c.query('rollback');
    } finally {
      await c.end();
    }
    const total = Object.values(read).reduce((x, y) => x + y, 0);
    // A recount of the whole queue reads its 5,000 partitions (and their tallies) at least.
    expect(read.partitions, JSON.stringify(read)).toBeGreaterThanOrEqual(1);
    expect(total, JSON.stringify(read)).toBeLessThanOrEqual(30);
    const { body } = await b.http('GET', `/api/v1/console/queues?search=${queue}`);
    expect(body.queues[0]).toMatchObject({ name: queue, partitions: WIDE, depth: 4, pushedTotal: 4 });
  }, 60_000);

  it('nothing is recounted while nothing is written', async () => {
    // A broker of its own: no lease or background recount left by the cases above.
    const idle = await startTestBroker({ config: { listingTotalsMs: INTERVAL_MS } });
    try {
      await idle.http('POST', '/api/v1/push', { items: [{ queue: uniqueName('lt-idle'), partition: 'p', payload: 1 }] });
      await idle.http('GET', '/api/v1/console/queues?limit=10');
      // The push's own recounts (its partition, its new queue in the background) done before the window.
      await idle.ctx.totals.flush();
      for (let i = 0; i < 100 && JSON.stringify(idle.ctx.totals.pending) !== JSON.stringify({ partitions: 0, background: 0, queues: 0, leased: 0 }); i++) await sleep(20);
      expect(await recountsWhile(idle, async () => {
        // Reads do not count as writes: listings and a scrape over several recount intervals.
        for (let i = 0; i < 5; i++) {
          await idle.http('GET', '/api/v1/console/queues?limit=10');
          await idle.http('GET', '/metrics');
          await sleep(INTERVAL_MS);
        }
      })).toBe(0);
      expect(idle.ctx.totals.pending).toEqual({ partitions: 0, background: 0, queues: 0, leased: 0 });

      // A lease left live is looked at again after the interval, then after twice as long, and so on.
      const queue = uniqueName('lt-lease');
      await idle.http('POST', '/api/v1/push', { items: [{ queue, partition: 'p', payload: 1 }] });
      await idle.ctx.totals.flush();
      const looks = await recountsWhile(idle, async () => {
        expect((await idle.http('GET', `/api/v1/pop/queue/${queue}/partition/p?wait=false`)).status).toBe(200);
        await sleep(10 * INTERVAL_MS);
      });
      // The pop's own recount (and its group's whole recount), then at 1, 3 and 7 intervals: not one per interval.
      expect(looks).toBeGreaterThanOrEqual(3);
      expect(looks).toBeLessThanOrEqual(6);
    } finally {
      await idle.stop();
    }
  });

  it(`another broker's write shows within QUEEN_LISTING_TOTALS_MS (${INTERVAL_MS} ms)`, async () => {
    const other = await startTestBroker({ databaseUrl: b.databaseUrl, config: { listingTotalsMs: INTERVAL_MS } });
    try {
      const queue = uniqueName('lt-other');
      await pushTo(queue, 'p', 1);
      await b.ctx.totals.flush();
      const t = Date.now();
      expect((await other.http('POST', '/api/v1/push', { items: [{ queue, partition: 'p', payload: 2 }] })).status).toBe(201);
      // Read through b, which wrote nothing of it: the other broker's recount brings it.
      const seen = await eventually(async () => {
        const { body } = await b.http('GET', `/api/v1/console/queues?search=${queue}`);
        return body.queues[0]?.depth === 2 && Date.now() - t;
      }, 5_000, 20);
      expect(seen).toBeLessThan(INTERVAL_MS + 1_000);
    } finally {
      await other.stop();
    }
  });

  it('an enqueue from outside the routes (@queen-mq/pg) shows: its partitions are announced to the brokers', async () => {
    const queue = uniqueName('lt-outbox');
    await pushTo(queue, 'p', 1);
    await b.ctx.totals.flush();
    // The application's own transaction enqueues: no route of the broker sees it.
    await b.sql.query('select * from queen.app_enqueue_v1($1::jsonb)', [JSON.stringify([{ queue, partition: 'p', payload: 1 }, { queue, partition: 'q', payload: 2 }])]);
    await eventually(async () => {
      const { body } = await b.http('GET', `/api/v1/console/queues?search=${queue}`);
      return body.queues[0]?.depth === 3 && body.queues[0].partitions === 2;
    }, 5_000, 50);
  });

  it('an ack from outside the routes (@queen-mq/pg) shows once its lease has ended', async () => {
    const queue = uniqueName('lt-app');
    await pushTo(queue, 'p', 3);
    const popped = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=3&wait=false`);
    expect(popped.body.messages).toHaveLength(3);
    // The application's own transaction acks: no route of the broker sees it.
    const items = popped.body.messages.map((m: any, idx: number) => ({ idx, transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId }));
    await b.sql.query('select queen.app_ack_v1($1, $2::jsonb)', ['__QUEUE_MODE__', JSON.stringify(items)]);
    // The leased partition is looked at again after each recount until its lease is gone.
    await eventually(async () => (await b.http('GET', `/api/v1/console/queues?search=${queue}`)).body.queues[0]?.depth === 0, 5_000, 50);
  });
});
