/**
 * Where parked long-poll pops wait (PROTOCOL §3.8), in FIFO lines per
 * (queue, consumer group, partition filter). A write wakes the head of each
 * line it can feed, not every waiter: with 1,000 parked pops a one-message
 * push used to send 1,000 pops to PostgreSQL, 999 of them for nothing. A pop
 * woken this way that finds messages wakes the next of its line (there may be
 * more); one that finds nothing parks again at the back. Only the head of a
 * line re-checks PostgreSQL on a timer (once a second: what remote brokers'
 * lost NOTIFYs, delayed messages and expiring leases rely on), so a line of
 * any length costs one query a second while nothing happens.
 */

/** How often the head of each line looks again without being woken. */
export const RECHECK_MS = 1000;

interface Waiter {
  wake(): void;
}

interface Line {
  group: string;
  /** The partition a pinned pop waits for; null: any partition of the queue. */
  partition: string | null;
  waiters: Waiter[];
  recheck?: NodeJS.Timeout;
}

const lineKey = (group: string, partition: string | null) => `${group}\u0000${partition ?? ''}`;

export class WaitRoom {
  private readonly queues = new Map<string, Map<string, Line>>();
  private size = 0;

  /** Pops parked now. */
  get parked(): number {
    return this.size;
  }

  /**
   * Resolves when this waiter is woken, after `ms`, or when a signal aborts.
   * Each signal gets a listener for this wait only (Node 20 keeps what
   * AbortSignal.any combines for as long as the long-lived signal lives).
   */
  park(queue: string, group: string, partition: string | null, ms: number, ...signals: (AbortSignal | undefined)[]): Promise<void> {
    return new Promise((resolve) => {
      const line = this.lineOf(queue, group, partition);
      let timer: NodeJS.Timeout | undefined;
      const waiter: Waiter = {
        wake: () => {
          clearTimeout(timer);
          for (const s of signals) s?.removeEventListener('abort', leave);
          resolve();
        },
      };
      const leave = () => {
        this.remove(queue, line, waiter);
        waiter.wake();
      };
      if (signals.some((s) => s?.aborted)) return resolve();
      for (const s of signals) s?.addEventListener('abort', leave, { once: true });
      timer = setTimeout(leave, Math.max(0, ms));
      line.waiters.push(waiter);
      this.size += 1;
      if (!line.recheck) {
        line.recheck = setInterval(() => this.wakeHead(queue, line), RECHECK_MS);
        line.recheck.unref();
      }
    });
  }

  /**
   * A write to `queue` committed: wakes the head of every line it can feed.
   * `partitions` names the partitions written (null: unknown, e.g. a remote
   * broker's NOTIFY, which wakes every line's head).
   */
  wake(queue: string, partitions: Iterable<string> | null = null): void {
    const lines = this.queues.get(queue);
    if (!lines) return;
    const touched = partitions === null ? null : new Set(partitions);
    for (const line of [...lines.values()]) {
      if (line.partition === null || touched === null || touched.has(line.partition)) this.wakeHead(queue, line);
    }
  }

  /** A pop of this line got messages: the next waiter may find more. */
  wakeNext(queue: string, group: string, partition: string | null): void {
    const line = this.queues.get(queue)?.get(lineKey(group, partition));
    if (line) this.wakeHead(queue, line);
  }

  /** Every waiter (shutdown, pops resumed, LISTEN reconnected). */
  wakeAll(): void {
    for (const [queue, lines] of [...this.queues]) {
      for (const line of [...lines.values()]) while (line.waiters.length) this.wakeHead(queue, line);
    }
  }

  private lineOf(queue: string, group: string, partition: string | null): Line {
    let lines = this.queues.get(queue);
    if (!lines) this.queues.set(queue, (lines = new Map()));
    const key = lineKey(group, partition);
    let line = lines.get(key);
    if (!line) lines.set(key, (line = { group, partition, waiters: [] }));
    return line;
  }

  private wakeHead(queue: string, line: Line): void {
    const head = line.waiters[0];
    if (!head) return;
    this.remove(queue, line, head);
    head.wake();
  }

  private remove(queue: string, line: Line, waiter: Waiter): void {
    const i = line.waiters.indexOf(waiter);
    if (i < 0) return;
    line.waiters.splice(i, 1);
    this.size -= 1;
    if (line.waiters.length === 0) {
      clearInterval(line.recheck);
      const lines = this.queues.get(queue);
      lines?.delete(lineKey(line.group, line.partition));
      if (lines?.size === 0) this.queues.delete(queue);
    }
  }
}
