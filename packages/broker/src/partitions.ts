import type { Database } from './database.js';
import { ClockCache } from './clock-cache.js';

interface PartitionRef {
  queueName: string;
  partitionName: string;
  partitionId: string;
  queueId: string;
}

const key = (queue: string, partition: string) => `${queue}\u0000${partition}`;

/** Partition ids this broker keeps cached at most (names are the clients' choice). */
const PARTITION_CACHE_MAX = 50_000;

/**
 * Queue/partition ids by name. Missing ones are created by
 * queen.ensure_partitions_v1, committed on their own before the main
 * transaction (PROTOCOL §4). Ids are cached: a push that finds its partition
 * deleted under it (another broker deleted the queue) forgets the cache and
 * retries once. The cache is a ClockCache of at most `maxCached` entries: a
 * client pushing to ever new partition names costs a lookup per new name,
 * never an ever larger heap, and a hit costs the same at any size.
 */
export class PartitionDirectory {
  private readonly cache: ClockCache<string, PartitionRef>;

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

  async ensure(targets: { queue: string; partition: string }[]): Promise<Map<string, PartitionRef>> {
    const out = new Map<string, PartitionRef>();
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
      const { rows } = await this.db.query<{ queue_name: string; partition_name: string; partition_id: string; queue_id: string }>(
        'select * from queen.ensure_partitions_v1($1::jsonb)',
        [JSON.stringify([...missing.values()])],
      );
      for (const r of rows) {
        const ref = { queueName: r.queue_name, partitionName: r.partition_name, partitionId: r.partition_id, queueId: r.queue_id };
        this.cache.set(key(r.queue_name, r.partition_name), ref);
        out.set(key(r.queue_name, r.partition_name), ref);
      }
      this.onMissed(missing.size);
    }
    return out;
  }

  get(map: Map<string, PartitionRef>, queue: string, partition: string): PartitionRef {
    const ref = map.get(key(queue, partition));
    if (!ref) throw new Error(`partition ${queue}/${partition} was not created`);
    return ref;
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
    for (const [k, v] of [...this.cache.entries()]) if (v.queueName === queue) this.cache.delete(k);
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
