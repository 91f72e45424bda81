import { z } from 'zod';
import type { RouteSpec } from './routes.js';
import { listPageQuery, name255, queueName } from './values.js';

// Recurring schedules (an extension of Queen v1): a cron expression in an
// IANA time zone that pushes one message per fire time, with the
// deterministic transactionId `schedule:<name>:<fire time ISO>`. The broker
// checks the expression and the zone itself (it owns the cron library) and
// answers SCHEDULE_INVALID_CRON / SCHEDULE_INVALID_TIME_ZONE.

/** `[A-Za-z0-9._-]{1,128}`: safe in a URL path, a shell and a transactionId. */
export const scheduleName = z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'must match [A-Za-z0-9._-]{1,128}');

/**
 * What a fire pass does with fire times that are already missed (older than
 * the broker's QUEEN_SCHEDULE_MISFIRE_MS, typically because no broker ran):
 * `skip` pushes none of them, `one` pushes the latest once, `all` pushes
 * each (at most SCHEDULE_MAX_CATCH_UP, the most recent ones).
 */
export const scheduleMissed = z.enum(['skip', 'one', 'all']);
export type ScheduleMissed = z.infer<typeof scheduleMissed>;

/** Missed fire times one schedule catches up at most with `missed: 'all'` (the most recent ones). */
export const SCHEDULE_MAX_CATCH_UP = 1000;

export const scheduleBody = z.object({
  name: scheduleName,
  /** 5 fields, or 6 with seconds first; names (MON-FRI) and nicknames (@daily). */
  cron: z.string().min(1).max(256),
  /** An IANA zone the cron's wall times are read in. */
  timeZone: z.string().min(1).max(64).default('UTC'),
  queue: queueName,
  partition: name255.default('Default'),
  payload: z.unknown().optional().transform((v) => (v === undefined ? null : v)),
  missed: scheduleMissed.default('one'),
});
export type ScheduleBody = z.input<typeof scheduleBody>;

export const schedule = z.object({
  name: z.string(),
  cron: z.string(),
  timeZone: z.string(),
  queue: z.string(),
  partition: z.string(),
  payload: z.unknown(),
  missed: scheduleMissed,
  /** The earliest fire time not pushed yet, ISO-8601 UTC. */
  nextFireAt: z.string(),
  /** The latest fire time pushed, null before the first. */
  lastFireAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type Schedule = z.infer<typeof schedule>;

/**
 * `created`; `updated` (the definition changed: the next fire time is
 * computed anew from now); `unchanged` (the same definition again: its next
 * fire time is kept, so re-declaring a schedule at every start loses none).
 */
export const scheduleUpsertResponse = schedule.extend({ status: z.enum(['created', 'updated', 'unchanged']) });
export type ScheduleUpsertResult = z.infer<typeof scheduleUpsertResponse>;

export const scheduleListResponse = z.object({
  schedules: z.array(schedule),
  total: z.number().int(),
  pagination: z.object({ limit: z.number().int(), offset: z.number().int() }),
});
export type ScheduleList = z.infer<typeof scheduleListResponse>;

export const scheduleParams = z.object({ name: scheduleName });
export const scheduleDeleteResponse = z.object({ deleted: z.boolean(), name: z.string() });

function route<const S extends RouteSpec>(spec: S): S {
  return spec;
}

export const scheduleRoutes = {
  scheduleUpsert: route({ method: 'POST', url: '/api/v1/schedules', level: 'read-write', summary: 'Create or replace a recurring schedule (201 when created)', body: scheduleBody, response: scheduleUpsertResponse }),
  scheduleList: route({ method: 'GET', url: '/api/v1/schedules', level: 'read-only', summary: 'Schedules by name with their next fire time (paged: limit, offset)', query: listPageQuery, response: scheduleListResponse }),
  scheduleGet: route({ method: 'GET', url: '/api/v1/schedules/:name', level: 'read-only', summary: 'One schedule', params: scheduleParams, response: schedule }),
  scheduleDelete: route({ method: 'DELETE', url: '/api/v1/schedules/:name', level: 'read-write', summary: 'Delete a schedule (fire times not pushed yet are dropped)', params: scheduleParams, response: scheduleDeleteResponse }),
} satisfies Record<string, RouteSpec>;
