import type { FastifyInstance } from 'fastify';
import { historyRanges, historyRoutes, QueenError, type HistoryRange } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';

// The history's read routes (migration 032, metrics/history.ts): a range
// reads the minute rows (1h, 24h: binned by five minutes) or the hour rows
// (30d) of one series, binned in SQL, and answers one point per bucket,
// zeros where no row was written. Each route first flushes this broker's
// own counts, so what it answered a moment ago is already in the history;
// other brokers' counts arrive with their next flush (QUEEN_HISTORY_FLUSH_MS).

interface Frame {
  range: HistoryRange;
  step: number;
  /** The first point's start, epoch seconds. */
  first: number;
  points: number;
  /** The rows' step: 60 or 3600. */
  source: number;
}

function frameOf(range: HistoryRange): Frame {
  const { step, points } = historyRanges[range];
  const now = Math.floor(Date.now() / 1000);
  const last = now - (now % step);
  return { range, step, points, first: last - (points - 1) * step, source: step >= 3600 ? 3600 : 60 };
}

const iso = (s: number) => new Date(s * 1000).toISOString();

function frameFields(f: Frame) {
  return { range: f.range, step: f.step, from: iso(f.first), to: iso(f.first + f.points * f.step) };
}

/** One value per point, zero where no row fell. */
function dense<R extends { t: string }, P>(f: Frame, rows: R[], point: (t: string, row: R | undefined) => P): P[] {
  const byT = new Map(rows.map((r) => [Number(r.t), r]));
  const out: P[] = [];
  for (let i = 0; i < f.points; i++) {
    const t = f.first + i * f.step;
    out.push(point(iso(t), byT.get(t)));
  }
  return out;
}

interface QueueRow {
  g: string;
  t: string;
  pushed: string;
  popped: string;
  acked: string;
  failed: string;
  dead: string;
  lag: string;
  dlq: string;
}

/**
 * The rows of a queue's series ('' = every queue) binned by the frame's
 * step: counts summed, samples the largest. $1 queue, $2 source step,
 * $3 first point (epoch s), $4 step, $5 only the group '' (true) or all.
 */
const QUEUE_SQL = `select h.consumer_group as g, (floor(extract(epoch from h.bucket) / $4::int) * $4::int)::bigint::text as t,
       sum(h.pushed)::text as pushed, sum(h.popped)::text as popped, sum(h.acked)::text as acked, sum(h.failed)::text as failed,
       sum(h.dead_lettered)::text as dead, max(h.lag)::text as lag, max(h.dlq)::text as dlq
  from queen.queue_history h
 where h.queue = $1 and h.step = $2 and h.bucket >= to_timestamp($3::float8) and (not $5 or h.consumer_group = '')
 group by 1, 2`;

const STREAM_SQL = `select (floor(extract(epoch from h.bucket) / $4::int) * $4::int)::bigint::text as t,
       sum(h.cycles)::text as cycles, sum(h.flushes)::text as flushes, sum(h.messages_in)::text as messages_in,
       sum(h.emitted)::text as emitted, sum(h.late)::text as late, sum(h.errors)::text as errors, max(h.lag)::text as lag,
       queen.iso(max(h.last_cycle_at)) as last_cycle_at, max(h.watermark_ms)::text as watermark
  from queen.stream_history h
 where h.query_id = $1 and h.step = $2 and h.bucket >= to_timestamp($3::float8)
 group by 1`;

/** Most consumer groups a queue's history answers. */
const MAX_GROUPS = 100;

export function historyApiRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  const history = ctx.metrics.history;
  const queueRows = async (queue: string, f: Frame, wholeOnly: boolean) =>
    (await ctx.db.query<QueueRow>(QUEUE_SQL, [queue, f.source, f.first, f.step, wholeOnly])).rows;

  registerRoute(app, historyRoutes.historyOverview, async ({ query }) => {
    await history.flush();
    const f = frameOf(query.range);
    const rows = await queueRows('', f, true);
    return { ...frameFields(f), points: dense(f, rows, queuePoint) };
  });

  registerRoute(app, historyRoutes.historyQueue, async ({ params, query }) => {
    await history.flush();
    const f = frameOf(query.range);
    const rows = await queueRows(params.queue, f, false);
    if (rows.length === 0) {
      const { rows: known } = await ctx.db.query('select 1 from queen.queues where name = $1', [params.queue]);
      if (!known[0]) throw new QueenError('QUEUE_NOT_FOUND', `Queue ${params.queue} not found`);
    }
    const byGroup = new Map<string, QueueRow[]>();
    for (const r of rows) {
      if (r.g === '') continue;
      let list = byGroup.get(r.g);
      if (!list) byGroup.set(r.g, (list = []));
      list.push(r);
    }
    // The queue's pops, acks and dead letters are its groups' summed, per point.
    const summed = new Map<string, QueueRow>();
    for (const r of rows) {
      const s = summed.get(r.t) ?? { ...r, g: '', pushed: '0', popped: '0', acked: '0', failed: '0', dead: '0', lag: '0', dlq: '0' };
      if (r.g === '') Object.assign(s, { pushed: r.pushed, lag: r.lag, dlq: r.dlq });
      else for (const k of ['popped', 'acked', 'failed', 'dead'] as const) s[k] = String(Number(s[k]) + Number(r[k]));
      summed.set(r.t, s);
    }
    const groups = [...byGroup.keys()].sort().slice(0, MAX_GROUPS);
    return {
      queue: params.queue,
      ...frameFields(f),
      points: dense(f, [...summed.values()], queuePoint),
      groups: groups.map((group) => ({
        group,
        points: dense(f, byGroup.get(group)!, (t, r) => ({
          t,
          popped: Number(r?.popped ?? 0),
          acked: Number(r?.acked ?? 0),
          failed: Number(r?.failed ?? 0),
          deadLettered: Number(r?.dead ?? 0),
          lag: Number(r?.lag ?? 0),
        })),
      })),
    };
  });

  registerRoute(app, historyRoutes.historyStream, async ({ params, query }) => {
    const { rows: found } = await ctx.db.query<{ query_id: string }>('select query_id from queen_streams.queries where name = $1', [params.name]);
    if (!found[0]) throw new QueenError('QUERY_NOT_FOUND', `Stream query ${params.name} not found`);
    await history.flush();
    const f = frameOf(query.range);
    const { rows } = await ctx.db.query<Record<'t' | 'cycles' | 'flushes' | 'messages_in' | 'emitted' | 'late' | 'errors' | 'lag', string> & { last_cycle_at: string | null; watermark: string | null }>(
      STREAM_SQL,
      [found[0].query_id, f.source, f.first, f.step],
    );
    return {
      query_id: found[0].query_id,
      name: params.name,
      ...frameFields(f),
      points: dense(f, rows, (t, r) => ({
        t,
        cycles: Number(r?.cycles ?? 0),
        flushes: Number(r?.flushes ?? 0),
        messages_in: Number(r?.messages_in ?? 0),
        emitted: Number(r?.emitted ?? 0),
        late: Number(r?.late ?? 0),
        errors: Number(r?.errors ?? 0),
        lag: Number(r?.lag ?? 0),
        last_cycle_at: r?.last_cycle_at ?? null,
        watermark: r?.watermark == null ? null : Number(r.watermark),
      })),
    };
  });
}

function queuePoint(t: string, r: QueueRow | undefined) {
  return {
    t,
    pushed: Number(r?.pushed ?? 0),
    popped: Number(r?.popped ?? 0),
    acked: Number(r?.acked ?? 0),
    failed: Number(r?.failed ?? 0),
    deadLettered: Number(r?.dead ?? 0),
    lag: Number(r?.lag ?? 0),
    dlq: Number(r?.dlq ?? 0),
  };
}
