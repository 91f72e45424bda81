/**
 * A Map bounded to `max` entries that drops the least recently used one.
 * For caches keyed by names clients choose (queues, partitions): without a
 * bound, a client inventing names would grow the broker's heap for ever.
 * Map keeps insertion order, so a hit re-inserts its entry at the end and
 * the first key is always the oldest.
 */
export class LruMap<K, V> {
  private readonly map = new Map<K, V>();

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new Error(`LruMap max must be a positive integer, got ${max}`);
  }

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value === undefined) return undefined;
    this.map.delete(key);
    this.map.set(key, value);
    return value;
  }

  set(key: K, value: V): this {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
    return this;
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }

  entries(): IterableIterator<[K, V]> {
    return this.map.entries();
  }
}
