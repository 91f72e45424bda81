import type { CycleBody, CycleResult } from '@queen-mq/protocol';
import { QueenError, WATERMARK_STATE_KEY } from '@queen-mq/protocol';
import type { Logger } from 'pino';
import type { Database } from '../db/database.js';

/** What the history's counts need of their broker. */
interface HistorySources {
  db: Database;
  log: Logger;
  config: { historyFlushMs: number };
}

/** What one broker counted for one (minute, queue, consumer group) since its last flush. */
interface QueueDelta {
  minute: number;
  queue: string;
  group: string;
  pushed: number;
  popped: number;
  acked: number;
  failed: number;
  dead: number;
}

/** What one broker counted for one (minute, stream query) since its last flush. */
interface StreamDelta {
  minute: number;
  queryId: string;
  cycles: number;
  flushes: number;
  messagesIn: number;
  emitted: number;
  late: number;
  errors: number;
  lastCycleAt: number | null;
  /** The newest event-time watermark (`__wm__`, epoch ms) its cycles wrote; null when none did. */
  watermark: number | null;
}

type QueueField = 'pushed' | 'popped' | 'acked' | 'failed' | 'dead';

/**
 * Most keys (minute × queue × group, and minute × query) one broker holds
 * between two flushes. Reached only when flushes keep failing (PostgreSQL
 * down for long) at a very large number of queues: past it new keys are not
 * counted, and the loss is logged once per flush.
 */
const MAX_KEYS = 500_000;

/**
 * Most keys of the current minute a timer flush writes. Each flush adds to
 * the rows of the keys it carries, so a key counted all minute long is
 * written once per flush: with more keys than this waiting in the current
 * minute (thousands of busy queues), the timer writes only the minutes that
 * have ended, each key once a minute, and the current minute waits for its
 * end (a history route still flushes everything before it reads).
 */
export const CURRENT_MINUTE_MAX_KEYS = 2_000;

const FLUSH_SQL = `select queen.history_flush_v2($1::timestamptz[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[],
  $9::timestamptz[], $10::uuid[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[], $17::timestamptz[], $18::bigint[]) as sampled`;

const minuteOf = (ms: number) => ms - (ms % 60_000);
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The history's counts of this broker (migration 032): the routes that
 * push, pop, ack and commit stream cycles add to a map in memory, with no
 * statement of their own, and `flush` adds the map to the history's minute
 * and hour rows in one statement (queen.history_flush_v2), from a timer
 * (historyService) and before a history route reads. Each broker adds only
 * what it counted, so several brokers on one database count each request
 * once. A failed flush keeps its counts for the next one.
 *
 * The overview row (queue '', group '') is this broker's counts summed per
 * minute, added at flush time.
 */
export class HistoryCounts {
  private queues = new Map<string, QueueDelta>();
  private streams = new Map<string, StreamDelta>();
  private dropped = 0;
  private flushing: Promise<void> | null = null;
  private again = false;
  /** The last minute this broker asked for the sample (an idle broker sends one statement a minute). */
  private sampledMinute = 0;

  constructor(private readonly ctx: HistorySources) {}

  private get enabled(): boolean {
    return this.ctx.config.historyFlushMs > 0;
  }

  private queueDelta(queue: string, group: string): QueueDelta | undefined {
    const minute = minuteOf(Date.now());
    const key = `${minute}\u0000${queue}\u0000${group}`;
    let d = this.queues.get(key);
    if (!d) {
      if (this.queues.size + this.streams.size >= MAX_KEYS) {
        this.dropped++;
        return undefined;
      }
      d = { minute, queue, group, pushed: 0, popped: 0, acked: 0, failed: 0, dead: 0 };
      this.queues.set(key, d);
    }
    return d;
  }

  /** Adds `n` to one count of (queue, group); group '' is the queue as a whole (pushes). */
  add(queue: string, group: string, field: QueueField, n: number): void {
    if (n <= 0 || !this.enabled) return;
    const d = this.queueDelta(queue, group);
    if (d) d[field] += n;
  }

  /** Ack items applied: completed/success count as acked, failed/dlq as failed. */
  addAck(queue: string, group: string, status: string, n: number): void {
    this.add(queue, group, status === 'completed' || status === 'success' ? 'acked' : 'failed', n);
  }

  /** One answered stream cycle element: the query's counts, its sink pushes and its source ack. */
  cycle(body: CycleBody, result: CycleResult, sinkQueues: Map<string, number>): void {
    if (!this.enabled || result.code === 'QUERY_NOT_FOUND' || result.code === 'FLUSH_DEFERRED') return;
    const d = this.streamDelta(body.query_id);
    if (!result.success) {
      if (d) d.errors++;
      return;
    }
    const messagesIn = result.ack_result?.count ?? 0;
    if (d) {
      d.cycles++;
      if (body.ack === null) d.flushes++;
      d.messagesIn += messagesIn;
      d.emitted += result.push_counts?.queued ?? 0;
      d.late += body.late ?? 0;
      d.lastCycleAt = Date.now();
      const wm = watermarkOf(body);
      if (wm !== undefined && (d.watermark === null || wm > d.watermark)) d.watermark = wm;
    }
    for (const [queue, n] of sinkQueues) this.add(queue, '', 'pushed', n);
    if (body.ack && result.queueName && messagesIn > 0) this.addAck(result.queueName, body.consumer_group, body.ack.status, messagesIn);
  }

  /** A cycle that failed with an error rather than an element answer. */
  cycleError(queryId: string): void {
    if (!this.enabled) return;
    const d = this.streamDelta(queryId);
    if (d) d.errors++;
  }

  private streamDelta(queryId: string): StreamDelta | undefined {
    const minute = minuteOf(Date.now());
    const key = `${minute}\u0000${queryId}`;
    let d = this.streams.get(key);
    if (!d) {
      if (this.queues.size + this.streams.size >= MAX_KEYS) {
        this.dropped++;
        return undefined;
      }
      d = { minute, queryId, cycles: 0, flushes: 0, messagesIn: 0, emitted: 0, late: 0, errors: 0, lastCycleAt: null, watermark: null };
      this.streams.set(key, d);
    }
    return d;
  }

  /** Keys waiting for the next flush. */
  get pending(): number {
    return this.queues.size + this.streams.size;
  }

  /**
   * Adds what was counted to the history now (after a flush in flight: a
   * call during one runs once more after it). Answers when the counts
   * counted before the call are written, or the flush failed (logged; the
   * counts are kept for the next one). `timer`: the periodic flush, which
   * leaves the current minute's keys for later when there are more than
   * CURRENT_MINUTE_MAX_KEYS of them.
   */
  flush(timer = false): Promise<void> {
    if (!this.enabled) return Promise.resolve();
    if (this.flushing) {
      if (!timer) this.again = true;
      return this.flushing;
    }
    this.flushing = (async () => {
      let ended = timer;
      do {
        this.again = false;
        await this.flushOnce(ended);
        ended = false;
      } while (this.again);
    })().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  /** The waiting keys to write now: all (`before` null), or those of the minutes before `before`, taken out of `map`. */
  private take<D extends { minute: number }>(map: Map<string, D>, before: number | null): Map<string, D> {
    if (before === null) return map;
    const out = new Map<string, D>();
    for (const [key, d] of map) {
      if (d.minute < before) {
        out.set(key, d);
        map.delete(key);
      }
    }
    return out;
  }

  private async flushOnce(timer: boolean): Promise<void> {
    const minute = minuteOf(Date.now());
    if (this.queues.size === 0 && this.streams.size === 0 && this.sampledMinute === minute) return;
    let before: number | null = null;
    if (timer) {
      let current = 0;
      for (const d of this.queues.values()) if (d.minute >= minute) current++;
      for (const d of this.streams.values()) if (d.minute >= minute) current++;
      if (current > CURRENT_MINUTE_MAX_KEYS) before = minute;
    }
    const queues = this.take(this.queues, before);
    const streams = this.take(this.streams, before);
    if (before === null) {
      this.queues = new Map();
      this.streams = new Map();
    } else if (queues.size === 0 && streams.size === 0 && this.sampledMinute === minute) return;
    if (this.dropped) {
      this.ctx.log.warn({ keys: this.dropped }, 'history counts not kept: too many keys waiting for a flush');
      this.dropped = 0;
    }
    const q = withOverview(queues.values());
    try {
      await this.ctx.db.query(FLUSH_SQL, [
        q.map((d) => iso(d.minute)),
        q.map((d) => d.queue),
        q.map((d) => d.group),
        q.map((d) => d.pushed),
        q.map((d) => d.popped),
        q.map((d) => d.acked),
        q.map((d) => d.failed),
        q.map((d) => d.dead),
        [...streams.values()].map((d) => iso(d.minute)),
        [...streams.values()].map((d) => d.queryId),
        [...streams.values()].map((d) => d.cycles),
        [...streams.values()].map((d) => d.flushes),
        [...streams.values()].map((d) => d.messagesIn),
        [...streams.values()].map((d) => d.emitted),
        [...streams.values()].map((d) => d.late),
        [...streams.values()].map((d) => d.errors),
        [...streams.values()].map((d) => (d.lastCycleAt === null ? null : iso(d.lastCycleAt))),
        [...streams.values()].map((d) => d.watermark),
      ]);
      this.sampledMinute = minute;
    } catch (err) {
      // Not written: counted again with what comes next.
      this.restore(queues, streams);
      if (!(err instanceof QueenError && err.code === 'DB_UNAVAILABLE')) this.ctx.log.warn({ err }, 'history flush failed');
    }
  }

  private restore(queues: Map<string, QueueDelta>, streams: Map<string, StreamDelta>): void {
    for (const [key, d] of queues) {
      const now = this.queues.get(key);
      if (!now) this.queues.set(key, d);
      else for (const f of ['pushed', 'popped', 'acked', 'failed', 'dead'] as const) now[f] += d[f];
    }
    for (const [key, d] of streams) {
      const now = this.streams.get(key);
      if (!now) this.streams.set(key, d);
      else {
        for (const f of ['cycles', 'flushes', 'messagesIn', 'emitted', 'late', 'errors'] as const) now[f] += d[f];
        now.lastCycleAt = Math.max(now.lastCycleAt ?? 0, d.lastCycleAt ?? 0) || null;
        if (d.watermark !== null && (now.watermark === null || d.watermark > now.watermark)) now.watermark = d.watermark;
      }
    }
  }
}

/**
 * The event-time watermark a cycle writes: its `__wm__` upsert (the runner's
 * row, written only when the watermark moves), epoch ms. Looked for from the
 * end, where the runner puts it.
 */
function watermarkOf(body: CycleBody): number | undefined {
  for (let i = body.state_ops.length - 1; i >= 0; i--) {
    const op = body.state_ops[i]!;
    if (op.key !== WATERMARK_STATE_KEY) continue;
    const ms = op.type === 'upsert' ? (op.value as { eventTimeMs?: unknown } | null)?.eventTimeMs : undefined;
    return typeof ms === 'number' && Number.isFinite(ms) ? ms : undefined;
  }
  return undefined;
}

/** The deltas plus, per minute, their sum as the overview row (queue '', group ''). */
function withOverview(deltas: Iterable<QueueDelta>): QueueDelta[] {
  const out: QueueDelta[] = [];
  const totals = new Map<number, QueueDelta>();
  for (const d of deltas) {
    out.push(d);
    let t = totals.get(d.minute);
    if (!t) totals.set(d.minute, (t = { minute: d.minute, queue: '', group: '', pushed: 0, popped: 0, acked: 0, failed: 0, dead: 0 }));
    t.pushed += d.pushed;
    t.popped += d.popped;
    t.acked += d.acked;
    t.failed += d.failed;
    t.dead += d.dead;
  }
  return out.concat([...totals.values()]);
}
