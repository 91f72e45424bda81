/**
 * A map bounded to `max` entries, for caches keyed by names clients choose
 * (queues, partitions): without a bound, a client inventing names would grow
 * the broker's heap for ever.
 *
 * Eviction is CLOCK, an approximation of least-recently-used: the entries sit
 * in a ring of slots, each with a "referenced" bit that a hit sets. When a new
 * key needs a slot and the ring is full, a hand walks the ring clearing set
 * bits and evicts the first entry whose bit was already clear: an entry hit
 * since the hand last passed it survives one more turn; one not hit since it
 * was inserted or passed goes first.
 *
 * Why not the usual Map-in-insertion-order LRU: that moves an entry to the end
 * on every hit (delete + set). V8's Map leaves a deleted entry in its hash
 * chain until the table is rebuilt, so re-inserting one hot key makes its
 * chain as long as the number of re-inserts since the last rebuild, and
 * rebuilds get rarer as the table grows: a hit cost grew with the table,
 * until it was most of a push's CPU with tens of thousands of cached
 * partitions. Here a hit is one Map read and one byte written; the Map is
 * only written when a key is inserted or evicted.
 */
export class ClockCache<K, V> {
  /** slot of each cached key */
  private readonly index = new Map<K, number>();
  private readonly keys: (K | undefined)[] = [];
  private readonly values: (V | undefined)[] = [];
  private readonly referenced: Uint8Array;
  /** slots emptied by delete, reused before the hand evicts anything */
  private readonly free: number[] = [];
  private hand = 0;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new Error(`ClockCache max must be a positive integer, got ${max}`);
    this.referenced = new Uint8Array(max);
  }

  get size(): number {
    return this.index.size;
  }

  get(key: K): V | undefined {
    const slot = this.index.get(key);
    if (slot === undefined) return undefined;
    this.referenced[slot] = 1;
    return this.values[slot];
  }

  set(key: K, value: V): this {
    const existing = this.index.get(key);
    if (existing !== undefined) {
      this.values[existing] = value;
      this.referenced[existing] = 1;
      return this;
    }
    const slot = this.free.pop() ?? (this.keys.length < this.max ? this.keys.length : this.evict());
    this.keys[slot] = key;
    this.values[slot] = value;
    this.referenced[slot] = 0;
    this.index.set(key, slot);
    return this;
  }

  delete(key: K): boolean {
    const slot = this.index.get(key);
    if (slot === undefined) return false;
    this.index.delete(key);
    this.keys[slot] = undefined;
    this.values[slot] = undefined;
    this.referenced[slot] = 0;
    this.free.push(slot);
    return true;
  }

  clear(): void {
    this.index.clear();
    this.keys.length = 0;
    this.values.length = 0;
    this.referenced.fill(0);
    this.free.length = 0;
    this.hand = 0;
  }

  *entries(): IterableIterator<[K, V]> {
    for (const [key, slot] of this.index) yield [key, this.values[slot] as V];
  }

  /**
   * Frees the slot under the hand that was not hit since the hand last
   * passed. Only called with every slot in use (free slots are taken first),
   * so each step of the walk clears a bit or finds the victim: at most one
   * turn of the ring, and on average one step per eviction.
   */
  private evict(): number {
    while (this.referenced[this.hand]) {
      this.referenced[this.hand] = 0;
      this.hand = (this.hand + 1) % this.max;
    }
    const victim = this.hand;
    this.hand = (this.hand + 1) % this.max;
    this.index.delete(this.keys[victim] as K);
    return victim;
  }
}
