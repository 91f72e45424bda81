import type { Queen } from '@queen-mq/client';

/**
 * Samples older than this are forgotten once a newer bucket has filled: a
 * local clock that steps forward (NTP) makes every later sample smaller, and
 * keeping the old maximum forever would leave the estimate ahead of the broker.
 */
const BUCKET_MS = 30_000;

/**
 * The broker's clock as this runner knows it, in epoch ms. Processing-time
 * windows are assigned by `createdAt`, which PostgreSQL stamps; the runner
 * must close them on that same clock, or a runner clock ahead of the
 * database closes a window early and the late contributions are dropped as
 * duplicate emits (issue 13 item 6).
 *
 * Every sample is a LOWER bound of the broker's time at the moment it was
 * received (a popped message was stamped before the pop answered; a Date
 * header was written before the response arrived), so `now()` = local clock +
 * the largest recent `broker − local` difference is never ahead of the broker:
 * a window may close a little late (by the delivery latency of the freshest
 * sample, or under a second for a Date header), never early.
 */
export class BrokerClock {
  private current: { startedAt: number; offset: number } | undefined;
  private previous: { startedAt: number; offset: number } | undefined;

  /** @param local the runner's own clock (epoch ms); a test seam, `Date.now` by default. */
  constructor(readonly local: () => number = () => Date.now()) {}

  /** True once a sample has been taken. */
  get synced(): boolean {
    return this.current !== undefined;
  }

  /** The broker's clock read at least `brokerMs` when this runner's clock read `localMs`. */
  observe(brokerMs: number, localMs: number = this.local()): void {
    if (!Number.isFinite(brokerMs) || !Number.isFinite(localMs)) return;
    const offset = brokerMs - localMs;
    if (!this.current || localMs - this.current.startedAt >= BUCKET_MS || localMs < this.current.startedAt) {
      this.previous = this.current;
      this.current = { startedAt: localMs, offset };
    } else if (offset > this.current.offset) {
      this.current.offset = offset;
    }
  }

  /** `broker − local` in ms (0 before the first sample). */
  offsetMs(): number {
    if (!this.current) return 0;
    return this.previous ? Math.max(this.previous.offset, this.current.offset) : this.current.offset;
  }

  /** The broker's time now, as a lower bound (the local clock until the first sample). */
  now(): number {
    return this.local() + this.offsetMs();
  }

  /**
   * The broker's time now, after a probe when no sample has been taken yet:
   * an idle flush never closes on the runner's own clock. Rejects when that
   * probe fails.
   */
  async nowAfterSync(queen: Pick<Queen, 'brokerDate'>): Promise<number> {
    if (!this.synced) await this.probe(queen);
    return this.now();
  }

  /**
   * Takes a sample from the broker's `Date` header (GET /health, no database
   * round trip). Used when no popped message has given one yet — a runner
   * restarted on a quiet source still has open windows to close on time.
   */
  async probe(queen: Pick<Queen, 'brokerDate'>, signal?: AbortSignal): Promise<void> {
    const date = await queen.brokerDate({ signal });
    // Whole seconds, written before the answer left: a lower bound at the time it arrived (or later).
    if (date !== undefined) this.observe(date, this.local());
  }
}
