import type { Database } from './database.js';
import { ClockCache } from './clock-cache.js';

const key = (queue: string, partition: string) => `${queue}\u0000${partition}`;

/** Partition ids this broker keeps cached at most (names are the clients' choice). */
const PARTITION_CACHE_MAX = 50_000;

/**
 * Partition ids by queue and partition name. Missing ones are created by
 * queen.ensure_partitions_v1, committed on their own before the main
 * transaction (PROTOCOL §4). Ids are cached: a push that finds its partition
 * deleted under it (another broker deleted the queue) forgets the cache and
 * retries once. The cache is a ClockCache of at most `maxCached` entries: a
 * client pushing to ever new partition names costs a lookup per new name,
 * never an ever larger heap, and a hit costs the same at any size.
 *
 * An entry is the key and the id, nothing else: a broker that pushed to
 * more partitions than the bound holds the bound, so every byte of an
 * entry counts as many times (partitions-memory.test.ts).
 */
export class PartitionDirectory {
  /** Partition id by `queue\0partition`. */
  private readonly cache: ClockCache<string, string>;

  /**
   * `onMissed`: told how many partitions each call had to ask the database
   * for (created, or not cached yet): statistics.ts refreshes the planner's
   * row counts as they grow.
   */
  constructor(
    private readonly db: Database,
    maxCached = PARTITION_CACHE_MAX,
    private readonly onMissed: (count: number) => void = () => undefined,
  ) {
    this.cache = new ClockCache(maxCached);
  }

  /** Entries cached now (bounded by the constructor's `maxCached`). */
  get cachedCount(): number {
    return this.cache.size;
  }

  /** The ids of `targets`' partitions, created when missing; read them with {@link idOf}. */
  async ensure(targets: { queue: string; partition: string }[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const missing = new Map<string, { queue: string; partition: string }>();
    // One cache lookup per distinct partition, not per item: a push of 100
    // items to one partition reads the cache once.
    for (const t of targets) {
      const k = key(t.queue, t.partition);
      if (out.has(k) || missing.has(k)) continue;
      const hit = this.cache.get(k);
      if (hit) out.set(k, hit);
      else missing.set(k, t);
    }
    if (missing.size) {
      const { rows } = await this.db.query<{ queue_name: string; partition_name: string; partition_id: string }>(
        'select * from queen.ensure_partitions_v1($1::jsonb)',
        [JSON.stringify([...missing.values()])],
      );
      for (const r of rows) {
        const k = key(r.queue_name, r.partition_name);
        this.cache.set(k, r.partition_id);
        out.set(k, r.partition_id);
      }
      this.onMissed(missing.size);
    }
    return out;
  }

  /** The id of a partition in what {@link ensure} answered. */
  idOf(ids: Map<string, string>, queue: string, partition: string): string {
    const id = ids.get(key(queue, partition));
    if (!id) throw new Error(`partition ${queue}/${partition} was not created`);
    return id;
  }

  /**
   * Runs `attempt` with the cached ids; when the allocator finds a partition
   * deleted under it (a queue delete or cleanup, maybe on another broker:
   * SQLSTATE P0002), forgets the cache and runs it once more, which
   * re-creates what is missing. The one retry of push, transaction and cycle.
   */
  async retrying<T>(attempt: () => Promise<T>): Promise<T> {
    try {
      return await attempt();
    } catch (err) {
      if ((err as { code?: string }).code !== 'P0002') throw err;
      this.forget();
      return attempt();
    }
  }

  /** Forgets every cached partition, or those of one queue (a walk of the whole cache). */
  forget(queue?: string): void {
    if (queue === undefined) return this.cache.clear();
    const prefix = key(queue, '');
    for (const [k] of [...this.cache.entries()]) if (k.startsWith(prefix)) this.cache.delete(k);
  }

  /**
   * Forgets these [queue, partition] pairs, one lookup each: what a cleanup
   * pass deleted costs what it deleted, not what is cached (forgetting by
   * queue walked the cache once per queue: 1.2 s of CPU for a pass deleting
   * 1,100 partitions of 100 queues with 25,000 cached).
   */
  forgetPartitions(pairs: Iterable<readonly [string, string]>): void {
    for (const [queue, partition] of pairs) this.cache.delete(key(queue, partition));
  }
}
