import pg from 'pg';
import { hostLabel, parsePgUrl, type PgHost, type PgUrl } from './connection-url.js';

/**
 * Whether a session is read-only, from the settings PostgreSQL 14+ reports
 * at start-up (`in_hot_standby`, `default_transaction_read_only`); undefined
 * when the server reports neither (older servers).
 */
export function reportedReadOnly(reported: ReadonlyMap<string, string>): boolean | undefined {
  const standby = reported.get('in_hot_standby');
  const readOnly = reported.get('default_transaction_read_only');
  if (standby === undefined && readOnly === undefined) return undefined;
  return standby === 'on' || readOnly === 'on';
}

/** Asked once per new session, only of servers that report neither setting. */
const READ_ONLY_SQL = `select pg_is_in_recovery() or current_setting('transaction_read_only') = 'on' as ro`;

/** The error of a session that reached a read-only server (a standby): SQLSTATE 25006, like a write refused there. */
function standbyError(h: PgHost): Error {
  return Object.assign(new Error(`${hostLabel(h)} is read-only (a standby): not kept for writes`), { code: '25006' });
}

/** A failover the router saw: the writable server moved from one host to another. */
interface FailoverEvent {
  from: string;
  to: string;
  /** From the first failure on `from` to the first session proved writable on `to`. */
  durationMs: number;
}

/** How long one probe of a host may take when the URL sets no connect_timeout. */
const PROBE_TIMEOUT_MS = 2000;

/**
 * Which server the broker's sessions go to. With one host: that host (a name
 * that moves to the new primary, the cloud way, is simply connected to
 * again). With several (libpq's multi-host URL): the last one found
 * writable; once it fails, the next new session tries the hosts in order,
 * one short probe session each, and keeps the first writable one. Every new
 * session is checked from what the server reports at start-up (no statement
 * on PostgreSQL 14+); a read-only one is closed and the search starts again.
 */
export class PrimaryRouter {
  readonly url: PgUrl | undefined;
  /** For node-postgres: a single-host URL (the first host), the host itself set per session. */
  readonly baseUrl: string;
  private current?: PgHost;
  private lastWritable?: PgHost;
  private finding?: Promise<PgHost>;
  private lostAt = 0;
  /** Failovers seen (the writable host changed). */
  failovers = 0;
  onFailover?: (e: FailoverEvent) => void;
  private readonly probeTimeoutMs: number;

  constructor(url: string) {
    try {
      this.url = parsePgUrl(url);
    } catch (err) {
      // A form only node-postgres reads (a socket path, ...) still works with one host.
      if (/^[a-z]+:\/\/[^/?#]*,/i.test(url)) throw err;
      this.url = undefined;
    }
    const attrs = this.url?.targetSessionAttrs;
    if (attrs === 'read-only' || attrs === 'standby' || attrs === 'prefer-standby') {
      throw new Error(`DATABASE_URL: target_session_attrs=${attrs} cannot be the broker's database: it writes (use read-write or primary)`);
    }
    this.baseUrl = this.url && this.url.hosts.length > 1 ? this.url.forHost(this.url.hosts[0]!) : url;
    this.probeTimeoutMs = this.url?.connectTimeoutS ? this.url.connectTimeoutS * 1000 : PROBE_TIMEOUT_MS;
  }

  /** More than one host: the primary is looked for. */
  get multiHost(): boolean {
    return (this.url?.hosts.length ?? 1) > 1;
  }

  /** The host last proved writable (`host:port`), or undefined while none is known. */
  get primary(): string | undefined {
    return this.current && hostLabel(this.current);
  }

  /** Where the next session goes (undefined: wherever the URL says). */
  target(): PgHost | undefined | Promise<PgHost> {
    if (this.current || !this.url) return this.current;
    if (!this.multiHost) return this.url.hosts[0]!.host === '' ? undefined : this.url.hosts[0];
    return (this.finding ??= this.find().finally(() => (this.finding = undefined)));
  }

  /** A session on `host` failed or proved read-only: the next one looks again (unless another host was found meanwhile). */
  lost(host?: PgHost): void {
    if (host && this.current && !sameHost(host, this.current)) return;
    if (this.lostAt === 0) this.lostAt = Date.now();
    this.current = undefined;
  }

  /** A session on `host` proved writable. */
  found(host: PgHost | undefined): void {
    if (!host) return;
    const previous = this.lastWritable;
    this.current = host;
    this.lastWritable = host;
    if (previous && !sameHost(previous, host)) {
      this.failovers++;
      this.onFailover?.({ from: hostLabel(previous), to: hostLabel(host), durationMs: this.lostAt ? Date.now() - this.lostAt : 0 });
    }
    this.lostAt = 0;
  }

  private async find(): Promise<PgHost> {
    const failures: string[] = [];
    for (const h of this.url!.hosts) {
      try {
        if (!(await this.probe(h))) {
          this.found(h);
          return h;
        }
        failures.push(`${hostLabel(h)} read-only`);
      } catch (err) {
        failures.push(`${hostLabel(h)} ${(err as Error).message}`);
      }
    }
    // 57P03 "cannot connect now": the Database reads it as PostgreSQL not being there.
    throw Object.assign(new Error(`no writable PostgreSQL host (${failures.join('; ')})`), { code: '57P03' });
  }

  /** Opens a short session to `h`: true when it is read-only. */
  private async probe(h: PgHost): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.baseUrl, connectionTimeoutMillis: this.probeTimeoutMs, application_name: 'queen-probe' });
    // A URL's host wins over a config's, so the host is set on the client itself (as RoutedClient does).
    Object.assign(client, { host: h.host, port: h.port });
    const reported = new Map<string, string>();
    (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) =>
      reported.set(m.parameterName, m.parameterValue),
    );
    client.on('error', () => undefined);
    try {
      await client.connect();
      return reportedReadOnly(reported) ?? (await client.query<{ ro: boolean }>(READ_ONLY_SQL)).rows[0]!.ro;
    } finally {
      void client.end().catch(() => undefined);
    }
  }

  /**
   * A node-postgres Client class whose sessions go where this router says,
   * and fail (and are never pooled) when they reach a read-only server.
   */
  clientClass(): typeof pg.Client {
    const router = this;
    class RoutedClient extends pg.Client {
      private readonly reported = new Map<string, string>();
      /** The host this session went to. */
      routedTo?: PgHost;

      constructor(config?: string | pg.ClientConfig) {
        super(config);
        (this as unknown as { connection: NodeJS.EventEmitter }).connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) =>
          this.reported.set(m.parameterName, m.parameterValue),
        );
      }

      // @ts-expect-error one implementation for both of pg.Client's overloads (promise and callback)
      connect(callback?: (err: Error | null) => void): Promise<void> | void {
        if (!callback) return new Promise<void>((resolve, reject) => this.connect((err) => (err ? reject(err) : resolve())));
        const target = router.target();
        if (target instanceof Promise) target.then((h) => this.open(h, callback), (err: Error) => callback(err));
        else this.open(target, callback);
      }

      private open(h: PgHost | undefined, callback: (err: Error | null) => void): void {
        const self = this as unknown as { host: string; port: number; connection: { stream: { destroyed?: boolean } } };
        // The pool gave up waiting for this session while the primary was looked for.
        if (self.connection.stream.destroyed) return callback(new Error('Connection terminated due to connection timeout'));
        if (h) {
          self.host = h.host;
          self.port = h.port;
        }
        this.routedTo = h;
        super.connect((err?: Error) => {
          if (err) {
            router.lost(h);
            return callback(err);
          }
          const readOnly = reportedReadOnly(this.reported);
          const decide = (ro: boolean) => {
            if (!ro) {
              router.found(h);
              return callback(null);
            }
            router.lost(h);
            this.end().catch(() => undefined);
            callback(standbyError(h ?? { host: 'the database', port: 0 }));
          };
          // Servers before 14 report neither setting: asked once, and only where the URL names several hosts.
          if (readOnly !== undefined || !router.multiHost) return decide(readOnly === true);
          super.query<{ ro: boolean }>(READ_ONLY_SQL).then(
            (r) => decide(r.rows[0]!.ro),
            (e: Error) => {
              router.lost(h);
              this.end().catch(() => undefined);
              callback(e);
            },
          );
        });
      }
    }
    return RoutedClient as unknown as typeof pg.Client;
  }
}

function sameHost(a: PgHost, b: PgHost): boolean {
  return a.host === b.host && a.port === b.port;
}
