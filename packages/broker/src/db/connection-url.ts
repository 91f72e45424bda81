import { ConnectionString } from 'connection-string';

/** libpq's `target_session_attrs`: which server of a multi-host URL a connection keeps. */
type TargetSessionAttrs = 'any' | 'read-write' | 'read-only' | 'primary' | 'standby' | 'prefer-standby';

const ATTRS: readonly TargetSessionAttrs[] = ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'];

/** One server of the URL, as node-postgres takes it (no brackets around an IPv6 address). */
export interface PgHost {
  host: string;
  port: number;
}

/** A PostgreSQL URL read the libpq way. */
export interface PgUrl {
  /** The servers in the order given; a connection tries them in this order. */
  hosts: PgHost[];
  /** As given; absent = libpq's default (`any`). */
  targetSessionAttrs?: TargetSessionAttrs;
  /** `connect_timeout`, seconds (libpq: per host); absent = none given. */
  connectTimeoutS?: number;
  /**
   * A single-host URL node-postgres can read, for one of `hosts`: the same
   * user, password, database and parameters (node-postgres ignores
   * `target_session_attrs`).
   */
  forHost(host: PgHost): string;
}

/**
 * Reads a PostgreSQL URL, including libpq's multi-host form
 * `postgresql://user@h1:5432,h2:5433/db?target_session_attrs=read-write&connect_timeout=3`
 * (ports optional: PGPORT or 5432). Throws an Error naming the problem for a
 * URL that is not one.
 */
export function parsePgUrl(url: string): PgUrl {
  let cs: ConnectionString;
  try {
    cs = new ConnectionString(url);
  } catch (err) {
    throw new Error(`DATABASE_URL is not a PostgreSQL URL: ${(err as Error).message}`);
  }
  if (cs.protocol !== 'postgres' && cs.protocol !== 'postgresql') {
    throw new Error(`DATABASE_URL must start with postgresql:// or postgres:// (got "${cs.protocol ?? ''}")`);
  }
  const defaultPort = Number(process.env.PGPORT) || 5432;
  const hosts: PgHost[] = (cs.hosts ?? []).map((h) => ({
    host: h.name!.replace(/^\[(.*)\]$/, '$1'),
    port: h.port ?? defaultPort,
  }));
  // No host in the authority: the parameters or PGHOST name it; node-postgres reads those itself.
  if (hosts.length === 0) hosts.push({ host: '', port: defaultPort });
  const params = (cs.params ?? {}) as Record<string, string>;
  const attrs = params.target_session_attrs;
  if (attrs !== undefined && !ATTRS.includes(attrs as TargetSessionAttrs)) {
    throw new Error(`DATABASE_URL: target_session_attrs must be one of ${ATTRS.join(', ')} (got "${attrs}")`);
  }
  const timeout = params.connect_timeout;
  if (timeout !== undefined && !/^\d+$/.test(timeout)) throw new Error(`DATABASE_URL: connect_timeout must be whole seconds (got "${timeout}")`);
  // node-postgres reads everything but the host list itself (user, password,
  // database, sslmode, options, ...): each host gets the URL with its
  // authority's host list replaced by that one host.
  const authority = /^([a-z]+:\/\/)([^@/?#]*@)?([^/?#]*)/i.exec(url);
  const forHost = (h: PgHost): string => {
    if (!authority || h.host === '') return url;
    const name = h.host.includes(':') ? `[${h.host}]` : h.host;
    return authority[1]! + (authority[2] ?? '') + `${name}:${h.port}` + url.slice(authority[0].length);
  };
  return {
    hosts,
    targetSessionAttrs: attrs as TargetSessionAttrs | undefined,
    connectTimeoutS: timeout === undefined ? undefined : Number(timeout),
    forHost,
  };
}

/** Whether a session with these server-reported settings may be kept for `attrs` ("primary"/"read-write": writable only). */
export function accepts(attrs: TargetSessionAttrs, readOnly: boolean): boolean {
  switch (attrs) {
    case 'read-write':
    case 'primary':
      return !readOnly;
    case 'read-only':
    case 'standby':
      return readOnly;
    default:
      return true;
  }
}

/** `host:port` as logs and metrics name a server. */
export function hostLabel(h: PgHost): string {
  return h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`;
}
