import pg from 'pg';
import type { Logger } from 'pino';
import { isUnavailable, type Database } from '../db/database.js';
import { lineProbe } from './line-probe.js';
import { WaitRoom } from './wait-room.js';

const PUBLISH_GAP_MS = 10;
/** Backoff of the LISTEN reconnect; capped low so cross-broker wake-ups resume within a second. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 1000;

/**
 * Wakes parked long-polls. A write on this process wakes them directly and is
 * published to the other brokers on the same database as NOTIFY on channel
 * `queen_push` (payload = queue name), after its transaction committed.
 *
 * The NOTIFY is sent here, not inside the writing transaction: PostgreSQL
 * serialises the commits of notifying transactions on one global lock held
 * through the WAL flush (measured: about half the batch-1 insert rate).
 * Publishes are coalesced (at most one statement per PUBLISH_GAP_MS, carrying
 * every queue touched meanwhile). Queues not published while the connection
 * is down, or whose publish failed, are published once it is back. One lost
 * with a broker that dies between a commit and its publish is found by the
 * other brokers' re-check sweep (wait-room.ts).
 */
export class PushNotifier {
  /** The parked pops of this broker (wait-room.ts); its re-check asks `db` (without one, every line looks). */
  readonly room: WaitRoom;
  private client?: pg.Client;
  private closed = false;
  private retryTimer?: NodeJS.Timeout;
  private retryDelay = RETRY_FIRST_MS;
  private connecting = false;
  private listened = false;
  private readonly unpublished = new Set<string>();
  private publishing = false;
  /** Partitions written outside any broker's routes (queen.app_enqueue_v1 announces them on `queen_totals`). */
  onPartitionsWritten?: (partitionIds: string[]) => void;

  /**
   * `db`, when given, is where an outage is reported and logged (once, for
   * the whole broker): the LISTEN connection then reconnects quietly, and at
   * once when the pool sees PostgreSQL again.
   */
  constructor(private readonly url: string, private readonly log: Logger, private readonly db?: Database) {
    this.room = new WaitRoom(db && lineProbe(db));
    db?.on('up', () => {
      if (this.client || this.closed || this.connecting) return;
      clearTimeout(this.retryTimer);
      this.retryTimer = undefined;
      this.retryDelay = RETRY_FIRST_MS;
      this.reconnectLater(0);
    });
  }

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, keepAlive: true, keepAliveInitialDelayMillis: 10000, application_name: 'queen-listen' });
    let backendPid = 0;
    client.on('notification', (msg) => {
      // Our own publishes come back too; the local wake-up already happened.
      if (msg.channel === 'queen_push' && msg.payload && msg.processId !== backendPid) this.room.wake(msg.payload);
      else if (msg.channel === 'queen_totals' && msg.payload) this.onPartitionsWritten?.(msg.payload.split(','));
    });
    // Only the live client's loss matters: a late 'end' of a replaced one must not drop its successor.
    const lost = (err?: Error) => {
      if (this.client !== undefined && this.client !== client) return;
      if (err && !this.closed) this.reportLoss(err);
      this.reconnectLater();
    };
    const ended = () => lost();
    client.on('error', lost);
    client.on('end', ended);
    try {
      await client.connect();
      backendPid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      await client.query('listen queen_push');
      await client.query('listen queen_totals');
    } catch (err) {
      client.removeListener('end', ended);
      await client.end().catch(() => undefined);
      throw err;
    }
    const reconnected = this.listened;
    this.listened = true;
    this.client = client;
    this.retryDelay = RETRY_FIRST_MS;
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    // Wake-ups published while we were not listening are lost: parked pops look again now.
    if (reconnected) this.wakeAll();
    // And ours that could not be published meanwhile go out now.
    if (this.unpublished.size > 0 && !this.publishing) void this.publish();
  }

  private reportLoss(err: Error): void {
    if (this.db && isUnavailable(err)) {
      this.db.markDown(err);
      this.log.debug({ err: err.message }, 'listen connection lost; reconnecting');
    } else this.log.warn({ err: err.message }, 'listen connection lost; reconnecting');
  }

  private reconnectLater(delay = this.retryDelay): void {
    if (this.closed || this.retryTimer) return;
    this.client = undefined;
    // A gap here delays, never loses: once listening again every parked pop
    // looks, and what this broker could not publish meanwhile goes out.
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.connecting = true;
      this.start().then(
        () => {
          this.connecting = false;
        },
        () => {
          this.connecting = false;
          this.retryDelay = Math.min(this.retryDelay * 2, RETRY_MAX_MS);
          this.reconnectLater();
        },
      );
    }, delay);
    this.retryTimer.unref();
  }

  /**
   * Call after the write to `queue` committed; `partitions` names the
   * partitions written, when known, so only pops that can be fed wake.
   */
  notify(queue: string, partitions: Iterable<string> | null = null): void {
    this.room.wake(queue, partitions);
    if (this.closed) return;
    // Kept while the connection is down: published once it is back (start()).
    this.unpublished.add(queue);
    if (this.client && !this.publishing) void this.publish();
  }

  private async publish(): Promise<void> {
    this.publishing = true;
    let queues: string[] = [];
    try {
      while (this.unpublished.size > 0 && this.client) {
        queues = [...this.unpublished];
        this.unpublished.clear();
        await this.client.query("select pg_notify('queen_push', q) from unnest($1::text[]) q", [queues]);
        queues = [];
        // A NOTIFY wakes a backend per listening broker: under a steady push
        // load one per PUBLISH_GAP_MS is plenty for parked remote pops.
        await new Promise((r) => setTimeout(r, PUBLISH_GAP_MS));
      }
    } catch (err) {
      // Published again with the next write, or once the connection is back.
      for (const q of queues) this.unpublished.add(q);
      // While PostgreSQL is down the Database has said so once; this is just a symptom.
      if (!this.closed) this.log[isUnavailable(err) ? 'debug' : 'warn']({ err: (err as Error).message }, 'could not publish a wake-up to other brokers');
    } finally {
      this.publishing = false;
    }
  }

  /** Wakes every parked pop (shutdown answers them with 204). */
  wakeAll(): void {
    this.room.wakeAll();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.wakeAll();
    await this.client?.end().catch(() => undefined);
  }
}
