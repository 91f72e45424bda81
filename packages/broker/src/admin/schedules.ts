import type { FastifyInstance } from 'fastify';
import { QueenError, scheduleRoutes, type Schedule } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { compileSchedule, fireAfter } from '../maintenance/schedule-cron.js';

// The schedule routes (create or replace, list, get, delete). The firing
// lives in schedule-firer.ts; the table in migrations/023_schedules.sql.

const COLUMNS = `name, cron, time_zone as "timeZone", queue_name as queue, partition_name as partition, payload, missed,
  queen.iso(next_fire_at) as "nextFireAt", queen.iso(last_fire_at) as "lastFireAt",
  queen.iso(created_at) as "createdAt", queen.iso(updated_at) as "updatedAt"`;

export function scheduleRouteHandlers(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, scheduleRoutes.scheduleUpsert, async ({ body, request, reply }) => {
    // Checked before any write: a bad expression or zone changes nothing.
    const clock = compileSchedule(body.cron, body.timeZone);
    // The first fire time counts from the database's clock, the one the firer compares with.
    const { rows: clockRows } = await ctx.db.query<{ now: Date }>('select clock_timestamp() as now');
    const next = fireAfter(clock, clockRows[0]!.now);
    // Same definition again: nothing changes (its next fire time is kept, so
    // re-declaring at every start loses no fire time). A changed one is
    // replaced and its next fire time computed anew from now.
    const { rows } = await ctx.db.query<Schedule & { inserted: boolean }>(
      `insert into queen.schedules as s (name, cron, time_zone, queue_name, partition_name, payload, missed, next_fire_at, producer_sub)
       values ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9)
       on conflict (name) do update
         set cron = excluded.cron, time_zone = excluded.time_zone, queue_name = excluded.queue_name,
             partition_name = excluded.partition_name, payload = excluded.payload, missed = excluded.missed,
             next_fire_at = excluded.next_fire_at, producer_sub = excluded.producer_sub, updated_at = now()
         where (s.cron, s.time_zone, s.queue_name, s.partition_name, s.payload, s.missed)
               is distinct from (excluded.cron, excluded.time_zone, excluded.queue_name, excluded.partition_name, excluded.payload, excluded.missed)
       returning ${COLUMNS}, (xmax = 0) as inserted`,
      [body.name, body.cron, body.timeZone, body.queue, body.partition, JSON.stringify(body.payload), body.missed, next, request.principal?.subject ?? null],
    );
    if (rows[0]) {
      const { inserted, ...row } = rows[0];
      ctx.schedules.wake();
      ctx.log.info({ schedule: row.name, cron: row.cron, timeZone: row.timeZone, queue: row.queue, nextFireAt: row.nextFireAt }, inserted ? 'schedule created' : 'schedule replaced');
      if (inserted) reply.code(201);
      return { ...row, status: inserted ? ('created' as const) : ('updated' as const) };
    }
    return { ...(await getSchedule(ctx, body.name)), status: 'unchanged' as const };
  });

  registerRoute(app, scheduleRoutes.scheduleList, async ({ query }) => {
    const { rows } = await ctx.db.query<Schedule>(`select ${COLUMNS} from queen.schedules order by name collate "C" limit $1 offset $2`, [query.limit, query.offset]);
    const { rows: count } = await ctx.db.query<{ n: number }>('select count(*)::int as n from queen.schedules');
    return { schedules: rows, total: count[0]!.n, pagination: { limit: query.limit, offset: query.offset } };
  });

  registerRoute(app, scheduleRoutes.scheduleGet, async ({ params }) => getSchedule(ctx, params.name));

  registerRoute(app, scheduleRoutes.scheduleDelete, async ({ params }) => {
    // Waits for a fire pass holding the row: a fire time it pushes commits
    // before the delete, none after.
    const { rowCount } = await ctx.db.query('delete from queen.schedules where name = $1', [params.name]);
    if (rowCount) ctx.log.info({ schedule: params.name }, 'schedule deleted');
    return { deleted: (rowCount ?? 0) > 0, name: params.name };
  });
}

async function getSchedule(ctx: BrokerContext, name: string): Promise<Schedule> {
  const { rows } = await ctx.db.query<Schedule>(`select ${COLUMNS} from queen.schedules where name = $1`, [name]);
  if (!rows[0]) throw new QueenError('SCHEDULE_NOT_FOUND', `Schedule ${JSON.stringify(name)} not found`);
  return rows[0];
}
