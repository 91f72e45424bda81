import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from 'pino';

/**
 * Wakes parked long-polls. Pushes on this process wake them directly; pushes
 * through any other broker on the same database arrive as NOTIFY on channel
 * `queen_push` (payload = queue name), sent by queen.log_push_one_v1 on commit.
 */
export class PushNotifier {
  private readonly events = new EventEmitter();
  private client?: pg.Client;
  private closed = false;
  private retryTimer?: NodeJS.Timeout;

  constructor(private readonly url: string, private readonly log: Logger) {
    this.events.setMaxListeners(0);
  }

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on('notification', (msg) => {
      if (msg.channel === 'queen_push' && msg.payload) this.notify(msg.payload);
    });
    client.on('error', (err) => {
      this.log.warn({ err: err.message }, 'listen connection lost; reconnecting');
      this.reconnectLater();
    });
    client.on('end', () => this.reconnectLater());
    await client.connect();
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

  notify(queue: string): void {
    this.events.emit(queue);
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
