// The umbrella: its Queen carries `queen.kv` and `tx.kv` (the KV's client half, no broker code).
import { QueenError, type PoppedMessage, type Queen } from 'queen-mq';
import { originalTransactionId, retryTransactionId } from './retry-id.js';
import type { AdmissionWindow } from './windows.js';

export interface InverseRateLimiterOptions {
  queen: Queen;
  /** Queue the jobs arrive on; refused jobs are pushed back onto it by a timer. */
  source: string;
  /** Queue admitted jobs are pushed to (transactionId `work-<original id>`). */
  work: string;
  /** How admissions are counted and when refused jobs come back. */
  window: AdmissionWindow;
  /** The limit key of a job. Default: its source partition (partition the source by limit key). */
  keyOf?: (message: PoppedMessage) => string;
  consumerGroup?: string;
  /** Messages per pop. Default 100; 1 = one transaction per message, the seed's literal form. */
  batch?: number;
  /** Pop loops in parallel (one partition each at a time). Default 1. */
  concurrency?: number;
  /** Long-poll bound per pop, ms. Default 1000. */
  waitMs?: number;
  /** Called after each commit, for logs and tests. */
  onCommit?: (event: { kind: 'admitted' | 'deferred'; messages: PoppedMessage[]; counter?: string; delayMs?: number }) => void;
  onError?: (err: unknown) => void;
}

export interface InverseRateLimiter {
  readonly stats: { admitted: number; deferred: number; transactions: number };
  /** Abandons parked pops, lets the batch in hand finish, resolves when every loop has stopped. */
  stop(): Promise<void>;
}

/**
 * The inverse rate limiter of SEED-streams ("Pacing is not expressible inside
 * an operator"): a flat consumer, because a stream cycle may carry neither
 * kv nor timers. For each popped job, in partition order:
 *   admit  = one transaction {kv incr of the window counter by the number of
 *            jobs, max = limit, requireApplied}, the pushes to `work`, the acks;
 *   refuse = on KV_MAX_EXCEEDED, one transaction {a timer per job re-pushing
 *            its payload to `source` later, transactionId
 *            `retry-<original>-<attempt>`, the acks}.
 * Both are atomic with the ack, so a crash never loses or doubles a job, and
 * the counter never passes the limit. A run of jobs for one key is admitted
 * in one transaction when the window has room for all of them; otherwise the
 * room left is read back and exactly that many are admitted.
 */
export function runInverseRateLimiter(options: InverseRateLimiterOptions): InverseRateLimiter {
  const { queen, window } = options;
  const source = queen.queue(options.source);
  const keyOf = options.keyOf ?? ((m: PoppedMessage) => m.partition);
  const onError = options.onError ?? ((err: unknown) => console.error('inverse-rate-limiter:', err));
  const stats = { admitted: 0, deferred: 0, transactions: 0 };
  const abort = new AbortController();

  const workItem = (m: PoppedMessage) => ({ payload: m.data, partition: m.partition, transactionId: `work-${originalTransactionId(m.transactionId)}` });

  /** Admits the first `n` jobs; false when the window refused (KV_MAX_EXCEEDED). */
  async function tryAdmit(jobs: PoppedMessage[], counter: ReturnType<AdmissionWindow['counter']>): Promise<boolean> {
    try {
      await queen
        .transaction()
        .kv.incr(counter.namespace, counter.key, { by: jobs.length, max: counter.max, ttlSeconds: counter.ttlSeconds, requireApplied: true })
        .push(options.work, jobs.map(workItem))
        .ack(jobs)
        .commit();
      stats.transactions++;
      stats.admitted += jobs.length;
      options.onCommit?.({ kind: 'admitted', messages: jobs, counter: `${counter.namespace}/${counter.key}` });
      return true;
    } catch (err) {
      if (err instanceof QueenError && err.code === 'KV_MAX_EXCEEDED') return false;
      throw err;
    }
  }

  /** Admits as many leading jobs as the window has room for; answers how many. */
  async function admit(jobs: PoppedMessage[], key: string): Promise<number> {
    let want = jobs.length;
    for (let attempt = 0; attempt < 5 && want > 0; attempt++) {
      const counter = window.counter(key, Date.now());
      if (await tryAdmit(jobs.slice(0, want), counter)) return want;
      // Refused: read how much room is left (another consumer may be taking it too).
      const used = Number((await queen.kv.get(counter.namespace, counter.key))?.value ?? 0);
      const room = Math.max(0, counter.max - used);
      if (room === 0) return 0;
      want = Math.min(room, jobs.length);
    }
    return 0;
  }

  async function defer(jobs: PoppedMessage[]): Promise<void> {
    const now = Date.now();
    const delayMs = Math.max(0, window.retryAt(now) - now);
    const tx = queen.transaction();
    for (const m of jobs) {
      tx.timer({ queue: options.source, partition: m.partition, payload: m.data, delayMs, transactionId: retryTransactionId(m.transactionId) });
    }
    await tx.ack(jobs).commit();
    stats.transactions++;
    stats.deferred += jobs.length;
    options.onCommit?.({ kind: 'deferred', messages: jobs, delayMs });
  }

  /** Jobs in partition order: acks must not overtake each other, so runs are handled one after another. */
  async function handle(messages: PoppedMessage[]): Promise<void> {
    let i = 0;
    while (i < messages.length) {
      const key = keyOf(messages[i]!);
      let j = i + 1;
      while (j < messages.length && keyOf(messages[j]!) === key) j++;
      const run = messages.slice(i, j);
      const admitted = await admit(run, key);
      if (admitted < run.length) await defer(run.slice(admitted));
      i = j;
    }
  }

  async function loop(): Promise<void> {
    while (!abort.signal.aborted) {
      try {
        const got = await source.pop({
          batch: options.batch ?? 100,
          wait: true,
          timeout: options.waitMs ?? 1000,
          consumerGroup: options.consumerGroup,
          signal: abort.signal,
        });
        if (got?.messages.length) await handle(got.messages);
      } catch (err) {
        if (abort.signal.aborted) return;
        // A lost lease or a broker hiccup: the unacked jobs come back with the lease.
        onError(err);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  const loops = Array.from({ length: options.concurrency ?? 1 }, () => loop());
  return {
    stats,
    async stop() {
      abort.abort();
      await Promise.all(loops);
    },
  };
}
