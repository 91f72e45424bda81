/**
 * Where parked long-poll pops wait (PROTOCOL §3.8), in FIFO lines per
 * (queue, consumer group, partition filter). A write wakes the head of each
 * line it can feed, not every waiter: with 1,000 parked pops a one-message
 * push used to send 1,000 pops to PostgreSQL, 999 of them for nothing. A pop
 * woken this way that finds messages wakes the next of its line (there may be
 * more); one that finds nothing parks again at the back.
 *
 * What no write announces (a lease, retry delay, delay or window buffer
 * running out; a remote broker's ack, which publishes nothing; pops paused
 * elsewhere) is found by the room's re-check, once a second while any pop is
 * parked: one statement asks PostgreSQL which of the lines parked since the
 * last re-check have a message past their group's cursor (the
 * {@link LineProbe}), and the head of each that has looks again. A line with
 * none can only be fed by a write, and writes wake it (here, or through the
 * other brokers' NOTIFY): it is asked again only in the sweep, SWEEP_LINES
 * lines a second, least recently asked first, which finds a write whose
 * wake-up was lost (a broker that died between its commit and its NOTIFY).
 * So 10,000 pops parked on 10,000 empty queues cost one small statement a
 * second, not 10,000 pops a second, and a line with messages held back
 * still looks every second, as before.
 *
 * Two things in flight are told about wakes they could have missed:
 *   - a pop's query ({@link WaitRoom.watch}): a write that commits after it
 *     began, while nobody of its line is parked, wakes no one; the pop then
 *     looks again instead of parking past the write;
 *   - an ack ({@link WaitRoom.stamp}): a write to a partition whose lease
 *     it releases may have woken a pop that found the partition still
 *     leased; the ack then wakes one even if it saw nothing left to claim.
 */

import { DeadlineQueue, type Timed } from './deadline-queue.js';

/** How often the room re-checks its lines while any pop is parked. */
export const RECHECK_MS = 1000;

/** Lines with nothing pending that one re-check asks about again (the sweep); fixed, however many are parked. */
export const SWEEP_LINES = 100;

/** A line as the probe sees it. */
export interface LineRef {
  readonly queue: string;
  readonly group: string;
  /** The partition a pinned pop waits for; null: any partition of the queue. */
  readonly partition: string | null;
}

/**
 * Asks which of `lines` have a message past their group's cursor (claimable
 * now or held back: queen.log_lines_pending_v1), by index, and whether pops
 * are paused. A throw counts every line as pending (each looks, as a
 * re-check did before the probe).
 */
export type LineProbe = (lines: readonly LineRef[]) => Promise<{ pending: number[]; paused: boolean }>;

/**
 * What parks in the room: a pop waiting for something to claim. The room
 * calls `wake` once per {@link WaitRoom.enter}: when a write, the re-check
 * or the pop ahead in its line wakes it, when its time is up, or when it
 * {@link WaitRoom.leave}s. The pop itself is the waiter (pop.ts extends
 * this class): no closure, promise or timer per wait, only these fields
 * (every object a parked pop holds counts once per parked pop, thousands of times).
 *
 * A line is a doubly linked list through its waiters: a place costs two
 * fields, not an array's slot and its spare capacity, and leaving from the
 * middle of a long line is O(1).
 */
export abstract class Waiter implements Timed {
  /** Neighbours in the line. */
  prev: Waiter | null = null;
  next: Waiter | null = null;
  /** The line it is parked in; null when not parked. */
  line: Line | null = null;
  /** When its wait ends at the latest (performance.now() ms): set before {@link WaitRoom.enter}. */
  deadline = 0;
  /** For the room's DeadlineQueue. */
  slot = -1;

  abstract wake(): void;
}

/** The promise form of a wait ({@link WaitRoom.park}). */
class Resolver extends Waiter {
  constructor(readonly wake: () => void) {
    super();
  }
}

interface Line extends LineRef {
  head: Waiter | null;
  tail: Waiter | null;
  /** Waiters in the line. */
  length: number;
  /** Pop queries of this line in flight ({@link WaitRoom.watch}). */
  checking: number;
  /** Wakes that found no waiter while a query was in flight. */
  missed: number;
}

const lineKey = (group: string, partition: string | null) => `${group}\u0000${partition ?? ''}`;

/**
 * The lines of one queue. Most queues with pops parked on them have one line
 * (one group, any partition): it is kept as is, and a Map only once a second
 * line joins it (a Map is some 200 bytes, per queue, with 10,000 pops parked
 * on as many queues).
 */
type QueueLines = Line | Map<string, Line>;

/** A pop query in flight on its line: whether a wake passed it by. */
interface Watch {
  readonly queue: string;
  readonly line: Line;
  readonly missed: number;
  /** Whether a pop of the line was parked when the query began (only then is "is there more" worth asking). */
  readonly waiting: boolean;
}

/** Slots of the last-wake numbers: fixed memory, whatever the number of queues and partitions. */
const SLOTS = 256;

/** FNV-1a of a queue name, or of a queue and partition name, to a slot. */
function slotOf(queue: string, partition?: string): number {
  let h = 0x811c9dc5;
  const mix = (text: string) => {
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  };
  mix(queue);
  if (partition !== undefined) {
    h = Math.imul(h, 0x01000193); // the separator
    mix(partition);
  }
  return (h >>> 0) % SLOTS;
}

export class WaitRoom {
  private readonly queues = new Map<string, QueueLines>();
  private size = 0;
  /** Lines a pop parked in since the last re-check: asked at the next one. */
  private readonly unprobed = new Set<Line>();
  /** Lines last found with nothing pending, least recently asked first (the sweep's order). */
  private readonly quiet = new Map<Line, true>();
  private recheckTimer?: NodeJS.Timeout;
  private rechecking = false;
  /** One timer for every parked pop's timeout. */
  private readonly timeouts = new DeadlineQueue<Waiter>((waiter) => this.leave(waiter));
  /** Numbers every write's wake, so a stamp is one number, not a copy of the slots. */
  private wakes = 0;
  /**
   * The number of the last wake naming a partition, by (queue, partition)
   * slot, and of the last naming none (a remote broker's NOTIFY), by queue
   * slot. Two partitions may share a slot: a check can then see a wake that
   * was not its partition's (one wake-up more), never miss one.
   */
  private readonly named = new Float64Array(SLOTS);
  private readonly unnamed = new Float64Array(SLOTS);

  /** Without a probe every line's head looks again at each re-check (a room without PostgreSQL: tests). */
  constructor(private readonly probe?: LineProbe) {}

  /** Pops parked now. */
  get parked(): number {
    return this.size;
  }

  /**
   * Whether pops of this line are parked now. Each of them looked and found
   * nothing, and every wake since went to the head of the line: a pop that
   * arrives now and would only find nothing can join the line unasked.
   */
  waiting(queue: string, group: string, partition: string | null): boolean {
    return (this.findLine(queue, group, partition)?.length ?? 0) > 0;
  }

  /**
   * Parks `waiter` at the back of its line until it is woken or until its
   * `deadline`; `waiter.wake()` is called once, either way. {@link leave} takes it
   * out early (its client went away). Shutdown needs nothing of the waiter:
   * the broker wakes every one (wakeAll) right after it aborts ctx.shutdown.
   */
  enter(queue: string, group: string, partition: string | null, waiter: Waiter): void {
    if (waiter.line) throw new Error('this waiter is already parked');
    const line = this.lineOf(queue, group, partition);
    waiter.line = line;
    waiter.prev = line.tail;
    if (line.tail) line.tail.next = waiter;
    else line.head = waiter;
    line.tail = waiter;
    line.length += 1;
    this.size += 1;
    this.timeouts.add(waiter);
    // This pop found nothing: what holds the line back is asked afresh.
    this.quiet.delete(line);
    this.unprobed.add(line);
    this.scheduleRecheck();
  }

  /** Takes the waiter out of its line and wakes it (its client went away, or its time is up); nothing when it is not parked. */
  leave(waiter: Waiter): void {
    if (!waiter.line) return;
    this.remove(waiter);
    waiter.wake();
  }

  /**
   * {@link enter} as a promise: resolves when the waiter is woken or after
   * `ms`; `door`, when given, is handed the function that lets it out.
   */
  park(queue: string, group: string, partition: string | null, ms: number, door?: (leave: () => void) => void): Promise<void> {
    return new Promise((resolve) => {
      const waiter = new Resolver(resolve);
      waiter.deadline = performance.now() + Math.max(0, ms);
      this.enter(queue, group, partition, waiter);
      door?.(() => this.leave(waiter));
    });
  }

  /**
   * A write to `queue` committed: wakes the head of every line it can feed.
   * `partitions` names the partitions written (null: unknown, e.g. a remote
   * broker's NOTIFY, which wakes every line's head).
   */
  wake(queue: string, partitions: Iterable<string> | null = null): void {
    const touched = partitions === null ? null : new Set(partitions);
    const n = ++this.wakes;
    if (touched === null) this.unnamed[slotOf(queue)] = n;
    else for (const p of touched) this.named[slotOf(queue, p)] = n;
    this.wakeLines(queue, null, touched);
  }

  /**
   * An ack of `group` released its lease on these partitions: wakes the head
   * of that group's lines they can feed. Other groups' cursors and leases
   * are their own, so the ack can give their pops nothing.
   */
  wakeGroup(queue: string, group: string, partitions: Iterable<string>): void {
    this.wakeLines(queue, group, new Set(partitions));
  }

  /** A pop of this line got messages and there are more: the next waiter may find them. */
  wakeNext(queue: string, group: string, partition: string | null): void {
    const line = this.findLine(queue, group, partition);
    if (line) this.wakeHead(line);
  }

  /** Every waiter (shutdown, pops resumed, LISTEN reconnected). */
  wakeAll(): void {
    // The first wake of an empty line tells its queries in flight.
    for (const line of this.allLines()) do this.wakeHead(line); while (line.length);
  }

  /** A pop query of this line starts; {@link unwatch} when its answer is back. */
  watch(queue: string, group: string, partition: string | null): Watch {
    const line = this.lineOf(queue, group, partition);
    line.checking += 1;
    return { queue, line, missed: line.missed, waiting: line.length > 0 };
  }

  unwatch(watch: Watch): void {
    watch.line.checking -= 1;
    this.dropIfIdle(watch.line);
  }

  /** Whether a wake for the watched line found no one parked while the query was in flight. */
  missedSince(watch: Watch): boolean {
    return watch.line.missed !== watch.missed;
  }

  /** The number of the last write's wake, for {@link wokenSince} once an ack's answer is back. */
  stamp(): number {
    return this.wakes;
  }

  /** Whether a write to the partition (or to its queue, unnamed) was woken since `stamp`. */
  wokenSince(stamp: number, queue: string, partition: string): boolean {
    return this.unnamed[slotOf(queue)]! > stamp || this.named[slotOf(queue, partition)]! > stamp;
  }

  private findLine(queue: string, group: string, partition: string | null): Line | undefined {
    const lines = this.queues.get(queue);
    if (lines === undefined) return undefined;
    if (!(lines instanceof Map)) return lines.group === group && lines.partition === partition ? lines : undefined;
    return lines.get(lineKey(group, partition));
  }

  private lineOf(queue: string, group: string, partition: string | null): Line {
    const found = this.findLine(queue, group, partition);
    if (found) return found;
    const line: Line = { queue, group, partition, head: null, tail: null, length: 0, checking: 0, missed: 0 };
    const lines = this.queues.get(queue);
    if (lines === undefined) this.queues.set(queue, line);
    else if (lines instanceof Map) lines.set(lineKey(group, partition), line);
    else this.queues.set(queue, new Map([[lineKey(lines.group, lines.partition), lines], [lineKey(group, partition), line]]));
    return line;
  }

  /** The lines of one queue (a copy: waking may drop lines). */
  private linesOf(queue: string): Line[] {
    const lines = this.queues.get(queue);
    if (lines === undefined) return [];
    return lines instanceof Map ? [...lines.values()] : [lines];
  }

  /** Every line (a copy: waking may drop lines). */
  private allLines(): Line[] {
    const out: Line[] = [];
    for (const lines of this.queues.values()) {
      if (lines instanceof Map) out.push(...lines.values());
      else out.push(lines);
    }
    return out;
  }

  /** The head of each line of the queue (of one group, or all) that a write to `touched` (null: any partition) can feed. */
  private wakeLines(queue: string, group: string | null, touched: Set<string> | null): void {
    for (const line of this.linesOf(queue)) {
      if (group !== null && line.group !== group) continue;
      if (line.partition === null || touched === null || touched.has(line.partition)) this.wakeHead(line);
    }
  }

  /** Wakes the head of the line; with no one parked, the line's queries in flight take note. */
  private wakeHead(line: Line): void {
    const head = line.head;
    if (!head) {
      if (line.checking > 0) line.missed += 1;
      return;
    }
    this.remove(head);
    head.wake();
  }

  private remove(waiter: Waiter): void {
    const line = waiter.line!;
    this.timeouts.remove(waiter);
    waiter.line = null;
    if (waiter.prev) waiter.prev.next = waiter.next;
    else line.head = waiter.next;
    if (waiter.next) waiter.next.prev = waiter.prev;
    else line.tail = waiter.prev;
    waiter.prev = waiter.next = null;
    line.length -= 1;
    this.size -= 1;
    if (line.length === 0) {
      this.unprobed.delete(line);
      this.quiet.delete(line);
      this.dropIfIdle(line);
    }
    if (this.size === 0) {
      clearTimeout(this.recheckTimer);
      this.recheckTimer = undefined;
    }
  }

  /** One timer for the whole room, while any pop is parked. */
  private scheduleRecheck(): void {
    if (this.recheckTimer || this.size === 0) return;
    this.recheckTimer = setTimeout(() => {
      this.recheckTimer = undefined;
      void this.recheck().finally(() => this.scheduleRecheck());
    }, RECHECK_MS);
    this.recheckTimer.unref();
  }

  /**
   * The re-check: asks the probe about the lines parked in since the last
   * one and about the sweep's share of the quiet ones, and wakes the head
   * of each line with something pending (of every line while pops are
   * paused: each answers so). Without a probe, every line's head.
   */
  private async recheck(): Promise<void> {
    if (this.rechecking) return;
    if (!this.probe) return this.wakeEveryHead();
    this.rechecking = true;
    try {
      const asked = [...this.unprobed];
      this.unprobed.clear();
      let swept = 0;
      for (const line of this.quiet.keys()) {
        if (swept++ >= SWEEP_LINES) break;
        asked.push(line);
      }
      if (asked.length === 0) return;
      let verdict: { pending: number[]; paused: boolean };
      try {
        verdict = await this.probe(asked);
      } catch {
        verdict = { pending: asked.map((_, i) => i), paused: false };
      }
      if (verdict.paused) return this.wakeEveryHead();
      const pending = new Set(verdict.pending);
      asked.forEach((line, i) => {
        if (line.length === 0) return;
        if (pending.has(i)) {
          this.quiet.delete(line);
          this.wakeHead(line);
          // Whoever is left in the line is asked about again next time.
          if (line.length) this.unprobed.add(line);
        } else if (!this.unprobed.has(line)) {
          // To the back of the sweep (unless a pop parked in meanwhile: then it is asked next time).
          this.quiet.delete(line);
          this.quiet.set(line, true);
        }
      });
    } finally {
      this.rechecking = false;
    }
  }

  /** The head of every line looks again; the rest of each line is asked about at the next re-check. */
  private wakeEveryHead(): void {
    for (const line of this.allLines()) {
      if (!line.length) continue;
      this.quiet.delete(line);
      this.wakeHead(line);
      if (line.length) this.unprobed.add(line);
    }
  }

  /** Forgets a line with neither waiters nor queries in flight; a queue left with one line keeps it without a Map. */
  private dropIfIdle(line: Line): void {
    if (line.length > 0 || line.checking > 0) return;
    const lines = this.queues.get(line.queue);
    if (lines === line) {
      this.queues.delete(line.queue);
      return;
    }
    if (!(lines instanceof Map)) return;
    const key = lineKey(line.group, line.partition);
    if (lines.get(key) !== line) return;
    lines.delete(key);
    if (lines.size === 1) this.queues.set(line.queue, lines.values().next().value!);
  }
}
