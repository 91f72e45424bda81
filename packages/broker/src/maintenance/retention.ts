import type pg from 'pg';
import { QueenError, type MaintenanceRunResult, type MaintenanceTask } from '@queen-mq/protocol';
import type { BrokerContext, HookedMaintenanceTask, MaintenanceTaskRunner } from '../context/context.js';
import { deleteExpiredState, expiredStateShards } from './expired-state.js';

/**
 * Segments one retention transaction drops at most (default segments hold up
 * to 10,000 messages): bounds how long it holds its partition's row lock.
 */
export const RETENTION_SEGMENTS_PER_TRANSACTION = 4;

/** Transaction-level advisory lock: one maintenance pass at a time across every replica. */
const MAINTENANCE_LOCK = 7_163_265_004;

export const allMaintenanceTasks: MaintenanceTask[] = ['retention', 'partitions', 'kv', 'timers', 'state'];

/**
 * One maintenance pass (PROTOCOL §3.9): retention drops whole segments by the
 * queue's time / completed / max-wait rules (completed = read by every
 * cursor, every subscribed group and every stream query of the queue, with
 * or without a cursor row), one partition and at most
 * RETENTION_SEGMENTS_PER_TRANSACTION segments per transaction; then partitions with no retained
 * message and no push for QUEEN_PARTITION_CLEANUP_S are deleted unless a
 * stream state row or a live lease vetoes it; then the tasks hooked in
 * (setMaintenanceTask), in the protocol's order. Each step is its own transaction, so each
 * takes its locks in the order of §4 from scratch, and each holds the
 * maintenance advisory lock: `wait` false skips the step when another replica
 * is in one (the periodic service), true waits for it (the /run route).
 * Answers null when the service skipped the pass.
 */
export async function runMaintenance(
  ctx: BrokerContext,
  tasks: MaintenanceTask[] = allMaintenanceTasks,
  wait = true,
): Promise<MaintenanceRunResult | null> {
  const step = <T>(fn: (client: pg.PoolClient) => Promise<T>) =>
    ctx.db.transaction(async (client): Promise<{ value: T } | null> => {
      // A pass may legitimately outlast the statement timeout of ordinary requests.
      await client.query('set local statement_timeout = 0');
      if (wait) await client.query('select pg_advisory_xact_lock($1)', [MAINTENANCE_LOCK]);
      else {
        const { rows } = await client.query<{ ok: boolean }>('select pg_try_advisory_xact_lock($1) as ok', [MAINTENANCE_LOCK]);
        if (!rows[0]!.ok) return null;
      }
      return { value: await fn(client) };
    });

  const out: MaintenanceRunResult = {
    success: true,
    retention: { segmentsDropped: 0, messagesDropped: 0 },
    partitions: { deleted: 0, vetoed: 0 },
    kv: { expiredPurged: 0 },
    timers: { fired: 0 },
    state: { expiredDeleted: 0 },
  };
  if (tasks.includes('retention')) {
    // One partition, a few segments, per transaction: a pass over a big
    // backlog never holds a partition lock (and so its pushes) for longer
    // than those segments take, and other partitions' pushes not at all.
    const list = await step(async (client) => (await client.query<{ id: string }>('select id from queen.log_retention_candidates_v1() id')).rows.map((r) => r.id));
    if (!list) return null;
    for (const partitionId of list.value) {
      for (;;) {
        const r = await step(async (client) => {
          const { rows } = await client.query<{ r: { segmentsDropped: number; messagesDropped: number; more: boolean } }>(
            'select queen.log_retention_partition_v1($1, $2) as r',
            [partitionId, RETENTION_SEGMENTS_PER_TRANSACTION],
          );
          return rows[0]!.r;
        });
        // Another replica started a pass meanwhile: it carries on from here.
        if (!r) return out;
        out.retention.segmentsDropped += Number(r.value.segmentsDropped);
        out.retention.messagesDropped += Number(r.value.messagesDropped);
        if (Number(r.value.messagesDropped) > 0) ctx.totals.touch([partitionId]);
        if (!r.value.more || ctx.shutdown.aborted) break;
      }
      if (ctx.shutdown.aborted) break;
    }
  }
  if (tasks.includes('partitions')) {
    const r = await step(async (client) => {
      const { rows } = await client.query<{ r: { deleted: number; vetoed: number; partitions: [string, string][] } }>(
        'select queen.log_partition_cleanup_v1($1) as r',
        [ctx.config.partitionCleanupS],
      );
      return rows[0]!.r;
    });
    if (!r) return null;
    out.partitions = { deleted: r.value.deleted, vetoed: r.value.vetoed };
    // Deleted partitions are stale in this broker's id cache, and counted in their queues' listing totals.
    ctx.partitions.forgetPartitions(r.value.partitions);
    ctx.totals.touchQueues([...new Set(r.value.partitions.map(([queue]) => queue))]);
  }
  for (const task of allMaintenanceTasks) {
    if (task === 'retention' || task === 'partitions' || !tasks.includes(task)) continue;
    const run = ctx.hooks.maintenance[task] as MaintenanceTaskRunner | undefined;
    if (!run) continue;
    const r = await step((client) => run(client, ctx));
    if (r) (out as Record<HookedMaintenanceTask, unknown>)[task] = r.value;
  }
  if (tasks.includes('state')) {
    // One transaction per (query, partition), under the locks a cycle takes (expired-state.ts).
    const shards = await step((client) => expiredStateShards(client));
    if (!shards) return out;
    for (const shard of shards.value) {
      const r = await step((client) => deleteExpiredState(client, shard));
      if (!r) return out;
      out.state.expiredDeleted += r.value;
      if (ctx.shutdown.aborted) break;
    }
  }
  return out;
}

/**
 * The retention service: a pass every QUEEN_RETENTION_INTERVAL_MS on every
 * replica; the advisory lock lets only one of them work at a time, the
 * others skip that tick.
 */
export function retentionService(ctx: BrokerContext): { stop(): Promise<void> } {
  let running: Promise<unknown> | undefined;
  const tick = () => {
    // Skipped while PostgreSQL is down: the Database logged that once and probes for it.
    if (running || ctx.shutdown.aborted || !ctx.db.available) return;
    running = runMaintenance(ctx, allMaintenanceTasks, false)
      .then((r) => {
        if (r && (r.retention.segmentsDropped || r.partitions.deleted)) ctx.log.info(r, 'maintenance pass');
      })
      .catch((err) => {
        if (!(err instanceof QueenError && err.code === 'DB_UNAVAILABLE')) ctx.log.warn({ err }, 'maintenance pass failed');
      })
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(tick, Math.max(ctx.config.retentionIntervalMs, 1000));
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
