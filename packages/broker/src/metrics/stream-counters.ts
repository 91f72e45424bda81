import type { CycleBody, CycleResult } from '@queen-mq/protocol';
import type { Database } from '../db/database.js';

/** What this broker process counted for one stream query since it started. */
interface QueryCounts {
  cycles: number;
  flushes: number;
  emitted: number;
  /** Sink pushes answered `duplicate`: a replay, or a window emitted twice (the runner reports that as WINDOW_REEMITTED). */
  duplicates: number;
  errors: number;
  lastCycleAt: number | null;
  lastErrorAt: number | null;
  lastErrorCode: string | null;
}

/**
 * Most queries one broker keeps counts for. Only cycles of registered
 * queries are counted (an unknown query_id answers QUERY_NOT_FOUND and is
 * not), so this bounds memory against a caller inventing ids, not a real
 * deployment; past it new queries are not counted until a drop frees room.
 */
const STREAM_COUNTERS_MAX = 10_000;

/**
 * Per-query cycle counters (BrokerContext.metrics.streamQueries), fed by the
 * cycle route (streams-cycle.ts) and read by GET /streams/v1/counters and /metrics. In memory and per process:
 * each replica counts the cycles it answered.
 */
export class StreamCounters {
  readonly since = Date.now();
  private readonly byQuery = new Map<string, QueryCounts>();
  /** When each query's entry was made: a read of the registered queries older than that cannot judge it. */
  private readonly createdAt = new Map<string, number>();

  private entry(queryId: string): QueryCounts | undefined {
    let c = this.byQuery.get(queryId);
    if (!c && this.byQuery.size < STREAM_COUNTERS_MAX) {
      c = { cycles: 0, flushes: 0, emitted: 0, duplicates: 0, errors: 0, lastCycleAt: null, lastErrorAt: null, lastErrorCode: null };
      this.byQuery.set(queryId, c);
      this.createdAt.set(queryId, performance.now());
    }
    return c;
  }

  /** One answered cycle element. */
  recordResult(body: CycleBody, result: CycleResult): void {
    // Neither a cycle nor an error: a dropped query, or an idle flush the broker held back (nothing written).
    if (result.code === 'QUERY_NOT_FOUND' || result.code === 'FLUSH_DEFERRED') return;
    const c = this.entry(body.query_id);
    if (!c) return;
    if (result.success) {
      c.cycles++;
      if (body.ack === null && !body.source_acks) c.flushes++;
      c.emitted += result.push_counts?.queued ?? 0;
      c.duplicates += result.push_counts?.duplicate ?? 0;
      c.lastCycleAt = Date.now();
    } else {
      this.failed(c, result.code ?? 'UNKNOWN');
    }
  }

  /** A cycle that failed with an error (database down, timeout) rather than an element answer. */
  recordError(queryId: string, code: string): void {
    const c = this.byQuery.get(queryId);
    if (c) this.failed(c, code);
  }

  private failed(c: QueryCounts, code: string): void {
    c.errors++;
    c.lastErrorAt = Date.now();
    c.lastErrorCode = code;
  }

  /**
   * Counts of the registered ids, and forgets the ids that were counted
   * before `readAt` (performance.now() when the registered set was read) but
   * are not in it: dropped queries. An id first counted after that read is a
   * query registered since, and is kept.
   */
  snapshot(registered: ReadonlySet<string>, readAt: number): Map<string, QueryCounts> {
    const out = new Map<string, QueryCounts>();
    for (const [id, c] of this.byQuery) {
      if (registered.has(id)) out.set(id, { ...c });
      else if ((this.createdAt.get(id) ?? 0) < readAt) {
        this.byQuery.delete(id);
        this.createdAt.delete(id);
      }
    }
    return out;
  }

  get size(): number {
    return this.byQuery.size;
  }
}

/** A counted query with its name, as /streams/v1/counters and /metrics report it. */
export interface NamedQueryCounts extends QueryCounts {
  queryId: string;
  name: string;
}

/**
 * The counts of the registered queries, by name, each registered query once
 * (zeros when this broker answered none of its cycles). Drops the counts of
 * queries that are gone.
 */
export async function namedStreamCounts(db: Database, counters: StreamCounters): Promise<NamedQueryCounts[]> {
  const readAt = performance.now();
  const { rows } = await db.query<{ query_id: string; name: string }>('select query_id, name from queen_streams.queries order by name collate "C"');
  const counts = counters.snapshot(new Set(rows.map((r) => r.query_id)), readAt);
  const zero: QueryCounts = { cycles: 0, flushes: 0, emitted: 0, duplicates: 0, errors: 0, lastCycleAt: null, lastErrorAt: null, lastErrorCode: null };
  return rows.map((r) => ({ queryId: r.query_id, name: r.name, ...(counts.get(r.query_id) ?? zero) }));
}
