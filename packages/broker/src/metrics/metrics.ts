import type { Logger } from 'pino';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from '../db/database.js';
import { TopCounter } from './top-counter.js';
import { HistoryCounts } from './history.js';
import { namedStreamCounts, StreamCounters, type NamedQueryCounts } from './stream-counters.js';

/**
 * The Prometheus series of one broker (PROTOCOL §5.10). Each broker owns its
 * own registry, never prom-client's global one, so several brokers in one
 * process (tests, embedded use) keep separate counts. Other features may add
 * their series to `registry`.
 */
export interface BrokerMetrics {
  registry: Registry;
  httpRequests: Counter<'route' | 'method' | 'status'>;
  httpDuration: Histogram<'route'>;
  pushed: TopCounter<'queue'>;
  duplicates: TopCounter<'queue'>;
  delivered: TopCounter<'queue'>;
  acked: TopCounter<'queue' | 'status'>;
  deadLettered: TopCounter<'queue'>;
  leaseExpired: TopCounter<'queue'>;
  longPollWaiting: Gauge;
  /** Per-query stream cycle counts (cycle route), read by /streams/v1/counters and the queen_stream_query_* series. */
  streamQueries: StreamCounters;
  /** This broker's counts for the history (history.ts), added to PostgreSQL in the background. */
  history: HistoryCounts;
  timersFired: Counter;
  schedulesFired: Counter;
  /** Due timer and schedule fire times left due because their queue was at maxSize, per fire pass that left them ({source}). */
  firesWaitingForRoom: Counter<'source'>;
}

/**
 * Most label sets one per-queue, per-group or per-query series reports by
 * default (QUEEN_METRICS_TOP_N): the N largest values (the deepest queues,
 * the most lagging groups, the busiest queues' counters), so a broker with
 * thousands of queues or groups still answers a bounded /metrics.
 */
export const GAUGE_TOP_N = 100;

interface SqlGaugeSpec<L extends string> {
  name: string;
  help: string;
  labelNames: L[];
  /** One statement; `$1` = the top N (QUEEN_METRICS_TOP_N). Rows carry the labels and `v`. */
  sql: string;
}

/**
 * The gauges computed on scrape, one SQL statement each (PROTOCOL §5.10 plus
 * the extension series in the broker README), read from the listing totals
 * (listing-totals.ts): the top N from the top of an index, one row per
 * queue, group or stream query shown, never the partitions or cursors under
 * them. A failing statement (database down, statement timeout) leaves its
 * gauge empty for that scrape and counts in
 * `queen_metrics_collect_errors_total`: /metrics itself still answers.
 */
const sqlGauges: SqlGaugeSpec<string>[] = [
  {
    name: 'queen_queue_depth',
    help: `Messages after the queue-mode cursor (__QUEUE_MODE__, the default group), per queue; the N deepest queues`,
    labelNames: ['queue'],
    sql: 'select t.queue_name as queue, t.depth as v from queen.queue_totals t order by t.depth desc, t.queue_name limit $1',
  },
  {
    name: 'queen_group_lag_messages',
    help: `Retained messages not yet acked (for a group its queue conflates, partitions with any), per queue and consumer group; the N largest`,
    labelNames: ['queue', 'group'],
    // A group its queue conflates (conflatedGroups) receives one message per partition that lags.
    sql: `select g.queue_name as queue, g.consumer_group as "group",
                 case when coalesce((select q.options->'conflatedGroups' ? g.consumer_group from queen.queues q where q.id = g.queue_id), false)
                      then g.partitions_with_lag else g.lag end as v
            from queen.group_totals g order by g.lag desc, g.queue_name, g.consumer_group limit $1`,
  },
  {
    name: 'queen_group_lag_seconds',
    help: 'Age of the oldest message not yet acked, per queue and consumer group (0 when caught up); for the N pairs with the most messages lagging',
    labelNames: ['queue', 'group'],
    sql: `select g.queue_name as queue, g.consumer_group as "group", coalesce(extract(epoch from now() - g.oldest_pending_at), 0)::float8 as v
            from queen.group_totals g order by g.lag desc, g.queue_name, g.consumer_group limit $1`,
  },
  {
    name: 'queen_dlq_depth',
    help: `DLQ entries per queue (every group); the N largest`,
    labelNames: ['queue'],
    sql: 'select t.queue_name as queue, t.dlq as v from queen.queue_totals t where t.dlq > 0 order by t.dlq desc, t.queue_name limit $1',
  },
  {
    name: 'queen_stream_lag_messages',
    help: `Source messages not yet acked by a stream query's default consumer group (streams.<name>); the N largest`,
    labelNames: ['query'],
    // A source partition the group has no cursor on yet counts whole (its retained messages).
    sql: `select q.name as query, (coalesce(g.lag, 0) + coalesce(t.retained, 0) - coalesce(g.retained, 0))::bigint as v
            from queen_streams.queries q
            left join queen.queues qu on qu.name = q.source_queue
            left join queen.queue_totals t on t.queue_id = qu.id
            left join queen.group_totals g on g.queue_id = qu.id and g.consumer_group = 'streams.' || q.name
           order by v desc, q.name limit $1`,
  },
  {
    name: 'queen_stream_state_rows',
    help: `State rows (open windows, gate state) per stream query; the N largest`,
    labelNames: ['query'],
    sql: `select q.name as query, count(s.key)::bigint as v
            from queen_streams.queries q left join queen_streams.state s on s.query_id = q.query_id
           group by q.name order by v desc, q.name limit $1`,
  },
];

/**
 * How often the event loop lag histogram (nodejs_eventloop_lag_*) samples,
 * in milliseconds. prom-client's default is a timer that woke an idle
 * broker's event loop 100 times a second for ever, most of what an idle
 * broker spent (apps/broker/src/idle.test.ts). A stall shorter than this is seen by the
 * samples it delays, a longer one always.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * What the series read when /metrics is scraped. The broker's context has
 * every field under these names; the listing totals are seen only through
 * the two members the gauges need.
 */
interface MetricsSources {
  db: Database;
  log: Logger;
  config: { metricsTopN: number; historyFlushMs: number };
  totals: {
    /** Counts this broker's own writes before a gauge reads the totals. */
    settle(): Promise<void>;
    /** What waits for a recount, by kind. */
    readonly pending: Record<string, number>;
  };
}

/**
 * The series of a new broker (BrokerContext.metrics). Scrape-time gauges
 * query the database when /metrics is read.
 */
export function createMetrics(ctx: MetricsSources): BrokerMetrics {
  const registry = new Registry();
  const registers = [registry];
  const pool = ctx.db.pool;
  const topN = ctx.config.metricsTopN;
  // Node process metrics (CPU, memory, event loop lag, GC, handles) on this broker's registry.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  const collectErrors = new Counter({
    name: 'queen_metrics_collect_errors_total',
    help: 'Scrape-time gauges left empty because their SQL statement failed',
    labelNames: ['gauge'],
    registers,
  });
  // The gauges of one scrape share one settle of the listing totals (this broker's own writes counted first).
  let settling: Promise<void> | undefined;
  const settled = () => {
    settling ??= ctx.totals.settle().finally(() => setImmediate(() => (settling = undefined)));
    return settling;
  };
  for (const spec of sqlGauges) {
    new Gauge({
      name: spec.name,
      help: spec.help.replace(/\bN\b/, String(topN)),
      labelNames: spec.labelNames,
      registers,
      async collect() {
        try {
          await settled();
          const { rows } = await ctx.db.query<Record<string, string | number>>(spec.sql, [topN]);
          this.reset();
          for (const row of rows) {
            this.set(Object.fromEntries(spec.labelNames.map((l) => [l, String(row[l])])), Number(row.v));
          }
        } catch (err) {
          this.reset();
          collectErrors.inc({ gauge: spec.name });
          ctx.log.warn({ err, gauge: spec.name }, 'metrics gauge not collected');
        }
      },
    });
  }
  const streamQueries = new StreamCounters();
  registerStreamQuerySeries(ctx, streamQueries, registers, collectErrors, topN);
  new Counter({
    name: 'queen_db_failovers_total',
    help: 'Times the broker followed a new primary (the writable host of a multi-host DATABASE_URL changed)',
    registers,
    collect() {
      this.reset();
      this.inc(ctx.db.router.failovers);
    },
  });
  new Gauge({
    name: 'queen_db_primary',
    help: 'The PostgreSQL host the broker writes to (host:port), 1; no series while none is known to be writable',
    labelNames: ['host'],
    registers,
    collect() {
      this.reset();
      const primary = ctx.db.router.primary;
      if (primary) this.set({ host: primary }, 1);
    },
  });
  new Gauge({
    name: 'queen_db_pool_connections',
    help: 'PostgreSQL pool connections by state (total, idle, active, waiting requests)',
    labelNames: ['state'],
    registers,
    collect() {
      this.set({ state: 'total' }, pool.totalCount);
      this.set({ state: 'idle' }, pool.idleCount);
      this.set({ state: 'active' }, pool.totalCount - pool.idleCount);
      this.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
  new Gauge({
    name: 'queen_listing_totals_backlog',
    help: 'What waits for a listing totals recount on this broker: partitions written, partitions of queues recounted whole, queues, leases watched',
    labelNames: ['kind'],
    registers,
    collect() {
      for (const [kind, n] of Object.entries(ctx.totals.pending)) this.set({ kind }, n);
    },
  });
  return {
    registry,
    httpRequests: new Counter({ name: 'queen_http_requests_total', help: 'HTTP requests answered', labelNames: ['route', 'method', 'status'], registers }),
    httpDuration: new Histogram({
      name: 'queen_http_request_duration_seconds',
      help: 'HTTP request duration by route (long-polls included)',
      labelNames: ['route'],
      // Up to the longest long-poll a pop may park (QUEEN_MAX_POP_TIMEOUT_MS).
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    pushed: new TopCounter({ name: 'queen_messages_pushed_total', help: 'Messages appended (status queued)', labelNames: ['queue'], registers, topN }),
    duplicates: new TopCounter({ name: 'queen_messages_duplicate_total', help: 'Pushed items answered duplicate', labelNames: ['queue'], registers, topN }),
    delivered: new TopCounter({ name: 'queen_messages_delivered_total', help: 'Messages returned by pops', labelNames: ['queue'], registers, topN }),
    acked: new TopCounter({ name: 'queen_messages_acked_total', help: 'Ack items applied, by status', labelNames: ['queue', 'status'], registers, topN }),
    deadLettered: new TopCounter({ name: 'queen_dlq_messages_total', help: 'Messages dead-lettered (by acks, and by pops that cannot decrypt the head of a partition)', labelNames: ['queue'], registers, topN }),
    leaseExpired: new TopCounter({ name: 'queen_lease_expired_total', help: 'Expired leases found and released by pops', labelNames: ['queue'], registers, topN }),
    longPollWaiting: new Gauge({ name: 'queen_long_poll_waiting', help: 'Pops parked in a long-poll right now', registers }),
    streamQueries,
    history: new HistoryCounts(ctx),
    timersFired: new Counter({ name: 'queen_timers_fired_total', help: 'Timers pushed to their queue', registers }),
    schedulesFired: new Counter({ name: 'queen_schedule_fires_total', help: 'Schedule fire times pushed to their queue by this broker', registers }),
    firesWaitingForRoom: new Counter({
      name: 'queen_fires_waiting_for_room_total',
      help: 'Due timers and schedule fire times left due because their queue was at maxSize (once per fire pass that left them)',
      labelNames: ['source'],
      registers,
    }),
  };
}

/**
 * Per-query stream series from the cycle route's counters (stream-counters.ts):
 * cycles, idle flushes, emitted sink messages, errors and the last commit
 * time, labelled by query name. Counted per broker process; at most
 * QUEEN_METRICS_TOP_N registered queries, those with the most cycles, so the label
 * set stays bounded.
 */
function registerStreamQuerySeries(ctx: MetricsSources, streamQueries: StreamCounters, registers: Registry[], collectErrors: Counter<'gauge'>, topN: number): void {
  let pending: Promise<NamedQueryCounts[]> | undefined;
  // The series share one read per scrape: the first collect starts it, the others await it.
  const counts = () => {
    pending ??= namedStreamCounts(ctx.db, streamQueries)
      .then((all) => [...all].sort((a, b) => b.cycles - a.cycles || (a.name < b.name ? -1 : 1)).slice(0, topN))
      .finally(() => setImmediate(() => (pending = undefined)));
    return pending;
  };
  const series: { name: string; help: string; type: 'counter' | 'gauge'; value: (q: NamedQueryCounts) => number | null }[] = [
    { name: 'queen_stream_query_cycles_total', help: 'Stream cycles committed, per query (this broker)', type: 'counter', value: (q) => q.cycles },
    { name: 'queen_stream_query_flushes_total', help: 'Committed stream cycles without a source ack (idle flushes), per query (this broker)', type: 'counter', value: (q) => q.flushes },
    { name: 'queen_stream_query_emitted_total', help: 'Sink messages stored by stream cycles, per query (this broker)', type: 'counter', value: (q) => q.emitted },
    { name: 'queen_stream_query_duplicates_total', help: 'Sink pushes of stream cycles answered duplicate (a replay, or a window emitted twice), per query (this broker)', type: 'counter', value: (q) => q.duplicates },
    { name: 'queen_stream_query_errors_total', help: 'Stream cycles that failed (success:false or an error), per query (this broker)', type: 'counter', value: (q) => q.errors },
    {
      name: 'queen_stream_query_last_cycle_timestamp_seconds',
      help: 'Unix time of the last committed stream cycle, per query (this broker; absent before the first)',
      type: 'gauge',
      value: (q) => (q.lastCycleAt === null ? null : q.lastCycleAt / 1000),
    },
  ];
  for (const spec of series) {
    const options = { name: spec.name, help: `${spec.help}; the ${topN} queries with the most cycles`, labelNames: ['query'] as const, registers };
    const fill = async (put: (query: string, v: number) => void, reset: () => void) => {
      try {
        const rows = await counts();
        reset();
        for (const q of rows) {
          const v = spec.value(q);
          if (v !== null) put(q.name, v);
        }
      } catch (err) {
        reset();
        collectErrors.inc({ gauge: spec.name });
        ctx.log.warn({ err, gauge: spec.name }, 'metrics series not collected');
      }
    };
    if (spec.type === 'counter') {
      new Counter({ ...options, async collect() { await fill((query, v) => this.inc({ query }, v), () => this.reset()); } });
    } else {
      new Gauge({ ...options, async collect() { await fill((query, v) => this.set({ query }, v), () => this.reset()); } });
    }
  }
}

/** Adds `n` per key of a small tally (one counter update per queue, not per message). */
export function tally<K extends string>(counts: Map<K, number>, key: K, n = 1): void {
  counts.set(key, (counts.get(key) ?? 0) + n);
}
