import type { FastifyInstance } from 'fastify';
import { errorMessage, isErrorCode, pushResultOf, QueenError, streamRoutes, type CycleBody, type CycleResult, type ErrorCode } from '@queen-mq/protocol';
import { Counter } from 'prom-client';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { tally } from '../metrics/metrics.js';
import { allocatorItems, boundedCounts, partitionsByQueue } from '../log/push.js';
import { queueMaxSizes } from '../log/encryption.js';
import type { AllocatorItem } from '../sql/queen.log_append_v1.js';
import { CYCLE_AT_VERSION_SQL, CYCLE_SQL, type CycleRow, type SinkAnswer } from '../sql/queen.log_streams_cycle_v1.js';

/** SQLSTATEs PostgreSQL raises for text or JSON it cannot store (U+0000, bad escapes): the client's input. */
const UNSTORABLE_INPUT = new Set(['22P05', '22021', '22P02']);

/** The §7.4 push_results of a cycle, from the allocator's arrays and the request's own items. */
function pushResultsOf(body: CycleBody, items: AllocatorItem[], answer: SinkAnswer | CycleResult['push_results']): CycleResult['push_results'] {
  if (Array.isArray(answer)) return answer; // a failed element answers []
  return answer.status.map((status, index) =>
    pushResultOf(index, body.push_items[index]!, items[index]!.partition_id, status, answer.message_id[index]!, answer.offset[index]!),
  );
}

/** The push_results `push_result_detail` asks for: every item, none (`counts`), or the duplicates only. */
function pushResultsAsked(body: CycleBody, items: AllocatorItem[], answer: SinkAnswer | CycleResult['push_results'], duplicates: number): CycleResult['push_results'] {
  if (body.push_result_detail === 'counts' || (body.push_result_detail === 'duplicates' && duplicates === 0)) return [];
  const all = pushResultsOf(body, items, answer);
  return body.push_result_detail === 'duplicates' ? all.filter((r) => r.status === 'duplicate') : all;
}

/** An element failure in words: SQL answers the code and its fields, the catalogue the text. */
function failureText(body: CycleBody, result: CycleResult, code: ErrorCode): string {
  return errorMessage(code, {
    key: result.key,
    currentVersion: result.currentVersion,
    expected: body.state_ops.find((op) => op.key === result.key)?.expected_version,
    count: code === 'QUEUE_FULL' ? result.count : body.ack?.count,
    queue: result.queue,
    pending: result.pending,
    maxSize: result.maxSize,
  });
}

/**
 * Commits one cycle element (PROTOCOL §7.4) through
 * queen.log_streams_cycle_v1: state ops, sink pushes and the source ack in one
 * transaction, all or nothing. Sink queues and partitions are created first in
 * their own statement (PROTOCOL §4: auto-creation commits before the main
 * transaction), so the procedure only takes append locks. Element outcomes,
 * failures included, are answers, not errors.
 */
async function runCycle(ctx: BrokerContext, body: CycleBody, producerSub: string | null, sinkQueues: Map<string, number>): Promise<CycleResult> {
  const { result, sinkItems } = await ctx.partitions.retrying(async () => {
    // The allocator's own item shape (queen_streams.push_sink_runs_v1 passes it on as is).
    const sinkItems = body.push_items.length > 0 ? await allocatorItems(ctx, body.push_items) : [];
    // Sink items per bounded queue (cached options, filled by allocatorItems): a cycle into unbounded sinks sends none.
    const bounded = body.push_items.length > 0 ? boundedCounts(body.push_items, await queueMaxSizes(ctx, body.push_items.map((i) => i.queue))) : new Map();
    const element = {
      idx: 0,
      query_id: body.query_id,
      partition_id: body.partition_id,
      consumer_group: body.consumer_group,
      state_ops: body.state_ops,
      sink_items: sinkItems,
      ack: body.ack,
      release_lease: body.release_lease,
      // A join's acks of its source partitions, and a lookup's KV reads (checked in the transaction).
      ...(body.source_acks ? { source_acks: body.source_acks } : {}),
      ...(body.kv_reads && body.kv_reads.length > 0 ? { kv_reads: body.kv_reads } : {}),
      // An idle flush's guard (queen_streams.flush_pending_v1.sql); absent on a cycle with an ack.
      ...(body.flush_before !== undefined ? { flush_before: body.flush_before } : {}),
      ...(body.flush_sources ? { flush_sources: body.flush_sources } : {}),
      ...(bounded.size ? { sink_bounded: [...bounded].map(([queue, count]) => ({ queue, count })) } : {}),
      // Stamped by the server (PROTOCOL §1.4); never taken from the body.
      producer_sub: producerSub,
    };
    try {
      const elements = JSON.stringify([element]);
      const { rows } = await ctx.db.query<CycleRow>(
        body.version === undefined ? CYCLE_SQL : CYCLE_AT_VERSION_SQL,
        body.version === undefined ? [elements] : [elements, body.version],
      );
      return { result: rows[0]!.r[0]!.result, sinkItems };
    } catch (err) {
      const code = (err as { code?: string }).code;
      // queen.kv_read_lock_v1 is the KV package's: a broker composed without the KV has none.
      if (code === '42883' && body.kv_reads && body.kv_reads.length > 0) {
        throw new QueenError('VALIDATION_FAILED', 'kv_reads needs the KV, which this broker does not run', {
          details: [{ field: 'kv_reads', message: 'this broker runs without the KV' }],
        });
      }
      if (code && UNSTORABLE_INPUT.has(code)) {
        throw new QueenError('VALIDATION_FAILED', 'Request contains text or JSON PostgreSQL cannot store (e.g. U+0000)', {
          details: [{ field: 'body', message: 'contains a value PostgreSQL cannot store (e.g. U+0000)' }],
        });
      }
      throw err;
    }
  });
  const answer = result.push_results as unknown as SinkAnswer | CycleResult['push_results'];
  // A failed element answers [] (nothing stored); else the items stored, once, for the counts and the wake-up.
  const stored = Array.isArray(answer) ? [] : body.push_items.filter((_, i) => answer.status[i] === 'queued');
  for (const item of stored) tally(sinkQueues, item.queue);
  result.push_counts = { queued: stored.length, duplicate: Array.isArray(answer) ? 0 : answer.status.length - stored.length };
  result.push_results = pushResultsAsked(body, sinkItems, answer, result.push_counts.duplicate);
  if (!result.success && isErrorCode(result.code)) result.error = failureText(body, result, result.code);
  if (result.success) {
    const sourceAcks = result.source_ack_results ?? [];
    ctx.totals.touch([body.partition_id, ...sourceAcks.map((a) => a.partition_id), ...sinkItems.map((i) => i.partition_id)]);
    for (const [queue, partitions] of partitionsByQueue(stored)) ctx.notifier.notify(queue, partitions);
    if (result.ack_result?.lease_released && result.queueName) ctx.notifier.notify(result.queueName);
    for (const a of sourceAcks) if (a.lease_released && a.queueName) ctx.notifier.notify(a.queueName);
  }
  return result;
}

export function streamCycleRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  // queen_streams_cycles_total{result}: cycle elements answered, by outcome (a gate deny of the first message sends none).
  const cycles = new Counter({ name: 'queen_streams_cycles_total', help: 'Stream cycle elements answered, by result', labelNames: ['result'], registers: [ctx.metrics.registry] });
  const perQuery = ctx.metrics.streamQueries;
  registerRoute(app, streamRoutes.streamsCycle, async ({ body, request }) => {
    let result: CycleResult;
    // The sink messages stored, per queue, for the history.
    const sinkQueues = new Map<string, number>();
    try {
      result = await runCycle(ctx, body, request.principal?.subject ?? null, sinkQueues);
    } catch (err) {
      // Database errors arrive translated (DB_UNAVAILABLE); anything else answers 500.
      perQuery.recordError(body.query_id, err instanceof QueenError ? err.code : 'INTERNAL_ERROR');
      ctx.metrics.history.cycleError(body.query_id);
      throw err;
    }
    cycles.inc({ result: result.success ? 'success' : result.code === 'FLUSH_DEFERRED' ? 'deferred' : result.code === 'QUEUE_FULL' ? 'sink_full' : 'failure' });
    perQuery.recordResult(body, result);
    ctx.metrics.history.cycle(body, result, sinkQueues);
    return result;
  });
}
