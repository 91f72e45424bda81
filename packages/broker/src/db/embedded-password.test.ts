import { chmodSync, existsSync, mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedPasswordFile, startEmbeddedPostgres, type EmbeddedPostgresHandle } from './embedded-postgres.js';

// The embedded PostgreSQL's superuser gets a random password per data
// directory, stored 0600 beside it and reused on restart.

const dir = mkdtempSync(join(tmpdir(), 'queen-pw-'));
const dataDir = join(dir, 'pg');
let server: EmbeddedPostgresHandle | undefined;

afterAll(async () => {
  await server?.stop().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

async function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const passwordOf = (url: string) => decodeURIComponent(new URL(url).password);

describe('embedded PostgreSQL password', () => {
  it('a new data directory gets a random password stored 0600 beside it; the old fixed one is refused; a restart reuses it', async () => {
    server = await startEmbeddedPostgres({ dataDir, unsafeFast: true });
    const file = embeddedPasswordFile(dataDir);
    expect(file).toBe(join(dir, 'pg.password'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const password = (await readFile(file, 'utf8')).trim();
    expect(password).toMatch(/^[0-9a-f]{32}$/);
    expect(passwordOf(server.url)).toBe(password);
    expect(await canConnect(server.url)).toBe(true);
    const fixed = new URL(server.url);
    fixed.password = 'queen';
    expect(await canConnect(fixed.toString())).toBe(false);

    await server.stop();
    server = await startEmbeddedPostgres({ dataDir, unsafeFast: true });
    expect(passwordOf(server.url)).toBe(password);
    expect(await canConnect(server.url)).toBe(true);

    // Another directory, another password.
    const other = await startEmbeddedPostgres({ dataDir: join(dir, 'pg2'), unsafeFast: true, persistent: false });
    try {
      expect(passwordOf(other.url)).not.toBe(password);
    } finally {
      await other.stop();
    }
    expect(existsSync(join(dir, 'pg2.password'))).toBe(false);
  });

  it('a directory initialised with the old fixed password (no file beside it) is rotated to a random one on start', async () => {
    const client = new pg.Client({ connectionString: server!.url });
    await client.connect();
    await client.query(`alter user postgres password 'queen'`);
    await client.end();
    await server!.stop();
    await rm(embeddedPasswordFile(dataDir));

    server = await startEmbeddedPostgres({ dataDir, unsafeFast: true });
    const password = (await readFile(embeddedPasswordFile(dataDir), 'utf8')).trim();
    expect(password).toMatch(/^[0-9a-f]{32}$/);
    expect(statSync(embeddedPasswordFile(dataDir)).mode & 0o777).toBe(0o600);
    expect(passwordOf(server.url)).toBe(password);
    expect(await canConnect(server.url)).toBe(true);
    const fixed = new URL(server.url);
    fixed.password = 'queen';
    expect(await canConnect(fixed.toString())).toBe(false);
  });

  it('the data directory parent keeps its mode (a /tmp-like sticky, world-writable one stays 1777); a private one only gains search for others', async () => {
    const shared = join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const privateDir = join(dir, 'private');
    mkdirSync(privateDir, { mode: 0o700 });
    chmodSync(privateDir, 0o700);
    for (const parent of [shared, privateDir]) {
      const other = await startEmbeddedPostgres({ dataDir: join(parent, 'pg'), unsafeFast: true, persistent: false });
      try {
        expect(await canConnect(other.url)).toBe(true);
      } finally {
        await other.stop();
      }
    }
    expect(statSync(shared).mode & 0o7777).toBe(0o1777);
    expect(statSync(privateDir).mode & 0o7777).toBe(0o701);
  });
});
