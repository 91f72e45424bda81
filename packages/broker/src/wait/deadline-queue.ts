/** What a {@link DeadlineQueue} holds: its deadline, and where the queue keeps it. */
export interface Timed {
  /** performance.now() at which it expires. */
  deadline: number;
  /** Its index in the queue's heap; -1 when not queued. */
  slot: number;
}

/**
 * Items that expire at a deadline, with one timer for all of them: a binary
 * min-heap by deadline and a timer armed for the earliest. It replaces a
 * Node timer per parked pop (the Timeout, its arguments, its place in
 * Node's timer lists, held once for each of thousands of parked pops).
 * Adding or removing an item is O(log n). An item expires when the timer
 * that fires finds its deadline passed, at most about a millisecond later
 * than its own timer would have fired.
 */
export class DeadlineQueue<T extends Timed> {
  private readonly heap: T[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The deadline the timer is armed for. */
  private armedFor = Infinity;

  /** `expire` is called once for each item whose deadline passed, after it left the queue. */
  constructor(private readonly expire: (item: T) => void) {}

  get size(): number {
    return this.heap.length;
  }

  /** Queues `item` to expire at its `deadline`. */
  add(item: T): void {
    item.slot = this.heap.length;
    this.heap.push(item);
    this.up(item.slot);
    this.arm();
  }

  /** Takes `item` out before its deadline; nothing if it is not queued. */
  remove(item: T): void {
    const i = item.slot;
    if (i < 0 || this.heap[i] !== item) return;
    item.slot = -1;
    const last = this.heap.pop()!;
    if (last !== item) {
      this.heap[i] = last;
      last.slot = i;
      this.down(i);
      this.up(last.slot);
    }
    if (this.heap.length === 0) this.disarm();
  }

  private arm(): void {
    const first = this.heap[0];
    if (!first || first.deadline >= this.armedFor) return;
    this.disarm();
    this.armedFor = first.deadline;
    this.timer = setTimeout(() => this.fire(), Math.max(1, Math.ceil(first.deadline - performance.now())));
  }

  private disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
  }

  private fire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = performance.now();
    // Expiring one may add or remove others (a pop answered, another parked): the head is read afresh each time.
    for (let first = this.heap[0]; first && first.deadline <= now; first = this.heap[0]) {
      this.remove(first);
      this.expire(first);
    }
    this.arm();
  }

  private up(i: number): void {
    const heap = this.heap;
    const item = heap[i]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = heap[p]!;
      if (parent.deadline <= item.deadline) break;
      heap[i] = parent;
      parent.slot = i;
      i = p;
    }
    heap[i] = item;
    item.slot = i;
  }

  private down(i: number): void {
    const heap = this.heap;
    const n = heap.length;
    const item = heap[i]!;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && heap[c + 1]!.deadline < heap[c]!.deadline) c += 1;
      const child = heap[c]!;
      if (item.deadline <= child.deadline) break;
      heap[i] = child;
      child.slot = i;
      i = c;
    }
    heap[i] = item;
    item.slot = i;
  }
}
