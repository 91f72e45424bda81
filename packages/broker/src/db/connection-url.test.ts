import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { pino } from 'pino';
import { freePort } from '../index.js';
import { startTestBroker } from '@queen-mq/testing';
import { accepts, parsePgUrl } from './connection-url.js';
import { PrimaryRouter, reportedReadOnly } from './primary.js';
import { Database } from './database.js';

describe('DATABASE_URL in libpq multi-host form', () => {
  it('reads hosts in order with their ports (5432 when absent, IPv6 in brackets), target_session_attrs and connect_timeout', () => {
    const u = parsePgUrl('postgresql://queen:p%40ss@10.0.0.1:6541,[::1]:6542,db3/queen?target_session_attrs=read-write&connect_timeout=3&sslmode=disable');
    expect(u.hosts).toEqual([
      { host: '10.0.0.1', port: 6541 },
      { host: '::1', port: 6542 },
      { host: 'db3', port: 5432 },
    ]);
    expect(u.targetSessionAttrs).toBe('read-write');
    expect(u.connectTimeoutS).toBe(3);
    // Each host gets a URL node-postgres reads: everything else kept as written.
    expect(u.forHost(u.hosts[1]!)).toBe('postgresql://queen:p%40ss@[::1]:6542/queen?target_session_attrs=read-write&connect_timeout=3&sslmode=disable');
    const cfg = new pg.Client({ connectionString: u.forHost(u.hosts[0]!) });
    expect([cfg.host, cfg.port, cfg.user, cfg.password, cfg.database]).toEqual(['10.0.0.1', 6541, 'queen', 'p@ss', 'queen']);
  });

  it('a single-host URL and a socket URL pass through unchanged', () => {
    expect(parsePgUrl('postgres://u@h/db').hosts).toEqual([{ host: 'h', port: 5432 }]);
    const router = new PrimaryRouter('postgres:///db?host=/var/run/postgresql');
    expect(router.baseUrl).toBe('postgres:///db?host=/var/run/postgresql');
    expect(router.multiHost).toBe(false);
  });

  it('refuses what it cannot serve: another scheme, an unknown target_session_attrs, a standby-only one, a timeout that is not seconds', () => {
    expect(() => parsePgUrl('mysql://h1,h2/db')).toThrow(/postgresql:\/\//);
    expect(() => parsePgUrl('postgresql://h1,h2/db?target_session_attrs=writable')).toThrow(/target_session_attrs must be one of/);
    expect(() => new PrimaryRouter('postgresql://h1,h2/db?target_session_attrs=prefer-standby')).toThrow(/cannot be the broker's database/);
    expect(() => parsePgUrl('postgresql://h1,h2/db?connect_timeout=1.5')).toThrow(/whole seconds/);
  });

  it('which sessions a target keeps, from what the server reports at log-in', () => {
    expect(reportedReadOnly(new Map([['in_hot_standby', 'on']]))).toBe(true);
    expect(reportedReadOnly(new Map([['in_hot_standby', 'off'], ['default_transaction_read_only', 'on']]))).toBe(true);
    expect(reportedReadOnly(new Map([['in_hot_standby', 'off'], ['default_transaction_read_only', 'off']]))).toBe(false);
    expect(reportedReadOnly(new Map())).toBeUndefined();
    expect([accepts('read-write', true), accepts('primary', false), accepts('standby', true), accepts('any', true)]).toEqual([false, true, true, true]);
  });

  it('a multi-host URL whose first host is down: the pool finds the second, serves, and names it as the primary', async () => {
    const b = await startTestBroker();
    const dead = await freePort();
    const live = new URL(b.databaseUrl);
    const multi = `postgresql://${live.username}:${live.password}@127.0.0.1:${dead},127.0.0.1:${live.port}${live.pathname}?target_session_attrs=read-write&connect_timeout=1`;
    const db = new Database(multi, { ...b.ctx.config, poolSize: 2 }, pino({ level: 'silent' }));
    try {
      const { rows } = await db.query<{ ro: boolean }>('select pg_is_in_recovery() as ro');
      expect(rows[0]!.ro).toBe(false);
      expect(db.router.primary).toBe(`127.0.0.1:${live.port}`);
      expect(db.router.failovers).toBe(0);
      // A lost session makes the next new one look again, and it lands on the same host: no failover.
      db.router.lost();
      expect(db.router.primary).toBeUndefined();
      await Promise.all([db.query('select pg_sleep(0.05)'), db.query('select pg_sleep(0.05)')]); // the second opens a session
      expect(db.router.primary).toBe(`127.0.0.1:${live.port}`);
      expect(db.router.failovers).toBe(0);
    } finally {
      await db.close();
      await b.stop();
    }
  });
});
