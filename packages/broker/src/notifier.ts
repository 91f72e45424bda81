import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from 'pino';

const PUBLISH_GAP_MS = 10;

/**
 * Wakes parked long-polls. A write on this process wakes them directly and is
 * published to the other brokers on the same database as NOTIFY on channel
 * `queen_push` (payload = queue name), after its transaction committed.
 *
 * The NOTIFY is sent here, not inside the writing transaction: PostgreSQL
 * serialises the commits of notifying transactions on one global lock held
 * through the WAL flush (measured: about half the batch-1 insert rate).
 * Publishes are coalesced (at most one statement per PUBLISH_GAP_MS, carrying
 * every queue touched meanwhile); one lost to a crash or a reconnect only
 * delays a remote pop, which re-checks every second anyway.
 */
export class PushNotifier {
  private readonly events = new EventEmitter();
  private client?: pg.Client;
  private closed = false;
  private retryTimer?: NodeJS.Timeout;
  private readonly unpublished = new Set<string>();
  private publishing = false;

  constructor(private readonly url: string, private readonly log: Logger) {
    this.events.setMaxListeners(0);
  }

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    let backendPid = 0;
    client.on('notification', (msg) => {
      // Our own publishes come back too; the local wake-up already happened.
      if (msg.channel === 'queen_push' && msg.payload && msg.processId !== backendPid) this.events.emit(msg.payload);
    });
    client.on('error', (err) => {
      this.log.warn({ err: err.message }, 'listen connection lost; reconnecting');
      this.reconnectLater();
    });
    client.on('end', () => this.reconnectLater());
    await client.connect();
    backendPid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    await client.query('listen queen_push');
    this.client = client;
  }

  private reconnectLater(): void {
    if (this.closed || this.retryTimer) return;
    this.client = undefined;
    // Parked pops re-check every second anyway, so a gap here delays, never loses.
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.start().catch(() => this.reconnectLater());
    }, 1000);
    this.retryTimer.unref();
  }

  /** Call after the write to `queue` committed. */
  notify(queue: string): void {
    this.events.emit(queue);
    if (!this.client) return;
    this.unpublished.add(queue);
    if (!this.publishing) void this.publish();
  }

  private async publish(): Promise<void> {
    this.publishing = true;
    try {
      while (this.unpublished.size > 0 && this.client) {
        const queues = [...this.unpublished];
        this.unpublished.clear();
        await this.client.query("select pg_notify('queen_push', q) from unnest($1::text[]) q", [queues]);
        // A NOTIFY wakes a backend per listening broker: under a steady push
        // load one per PUBLISH_GAP_MS is plenty for parked remote pops.
        await new Promise((r) => setTimeout(r, PUBLISH_GAP_MS));
      }
    } catch (err) {
      if (!this.closed) this.log.warn({ err: (err as Error).message }, 'could not publish a wake-up to other brokers');
    } finally {
      this.publishing = false;
    }
  }

  /** Resolves on a push to `queue`, after `ms`, or when `signal` aborts. */
  wait(queue: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.events.off(queue, done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.events.on(queue, done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Wakes every parked pop (shutdown answers them with 204). */
  wakeAll(): void {
    for (const name of this.events.eventNames()) this.events.emit(name);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.wakeAll();
    await this.client?.end().catch(() => undefined);
  }
}
