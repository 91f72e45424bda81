import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

/** A package's numbered SQL files (`001_name.sql`), applied in order. */
export interface MigrationSource {
  owner: string;
  dir: string;
}

export const brokerMigrations: MigrationSource = {
  owner: 'broker',
  dir: fileURLToPath(new URL('../migrations', import.meta.url)),
};

const LOCK_KEY = 7_163_265_001; // advisory lock: one migrator at a time across brokers

async function files(source: MigrationSource): Promise<{ number: number; name: string; path: string }[]> {
  const names = (await readdir(source.dir)).filter((f) => /^\d+_.*\.sql$/.test(f)).sort();
  return names.map((name) => ({ number: Number.parseInt(name, 10), name, path: join(source.dir, name) }));
}

/** Highest migration number a source ships: what `/ready` expects to find. */
export async function expectedVersion(source: MigrationSource): Promise<number> {
  const list = await files(source);
  return list.length ? list[list.length - 1]!.number : 0;
}

/** SHA-256 of a migration's text, line endings normalised (a checkout on Windows is the same file). */
export function checksumOf(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

/**
 * An applied migration whose file changed since: the database may differ
 * from what the files describe, so the broker refuses to start rather than
 * run on a schema nobody can reproduce. Migrations are never edited in
 * place; a change is a new numbered file.
 */
export class MigrationChangedError extends Error {
  readonly code = 'MIGRATION_CHANGED';
  constructor(owner: string, name: string, applied: string, now: string) {
    super(
      `migration ${owner}/${name} was changed after it was applied to this database (applied sha256 ${applied.slice(0, 12)}…, file now ${now.slice(0, 12)}…). ` +
        'Restore the file as it was and put the change in a new numbered migration.',
    );
    this.name = 'MigrationChangedError';
  }
}

/**
 * Applies every unapplied migration of each source, in order, each in its own
 * transaction, under a session advisory lock so concurrent brokers starting on
 * one database do not race. Every applied migration's checksum is compared
 * with its file first (MigrationChangedError). Answers the names applied.
 */
export async function migrate(pool: pg.Pool, sources: MigrationSource[]): Promise<string[]> {
  const client = await pool.connect();
  // A checked-out client has no error listener of the pool's: PostgreSQL
  // going away mid-migration must fail the statement in flight, not crash
  // the process with an unhandled 'error' event.
  let lost: Error | undefined;
  const onError = (err: Error) => {
    lost = err;
  };
  client.on('error', onError);
  const applied: string[] = [];
  try {
    // Waiting for another broker's migrations, or one big migration, may
    // outlast the statement timeout of ordinary requests.
    await client.query('set statement_timeout = 0');
    await client.query('select pg_advisory_lock($1)', [LOCK_KEY]);
    await client.query(`create schema if not exists queen;
      create table if not exists queen.migrations (owner text not null, name text not null,
        applied_at timestamptz not null default now(), primary key (owner, name));
      alter table queen.migrations add column if not exists checksum text;
      create table if not exists queen.schema_version (owner text primary key, version int not null)`);
    for (const source of sources) {
      const done = new Map(
        (await client.query<{ name: string; checksum: string | null }>('select name, checksum from queen.migrations where owner = $1', [source.owner])).rows.map((r) => [r.name, r.checksum]),
      );
      for (const file of await files(source)) {
        const sql = await readFile(file.path, 'utf8');
        const checksum = checksumOf(sql);
        if (done.has(file.name)) {
          const stored = done.get(file.name);
          // Applied by a build that kept no checksum: this file is taken as what was applied.
          if (stored === null) await client.query('update queen.migrations set checksum = $3 where owner = $1 and name = $2', [source.owner, file.name, checksum]);
          else if (stored !== checksum) throw new MigrationChangedError(source.owner, file.name, stored!, checksum);
          continue;
        }
        try {
          await client.query('begin');
          await client.query(sql);
          await client.query('insert into queen.migrations (owner, name, checksum) values ($1, $2, $3)', [source.owner, file.name, checksum]);
          await client.query(
            `insert into queen.schema_version (owner, version) values ($1, $2)
             on conflict (owner) do update set version = greatest(queen.schema_version.version, excluded.version)`,
            [source.owner, file.number],
          );
          await client.query('commit');
          applied.push(`${source.owner}/${file.name}`);
        } catch (err) {
          await client.query('rollback').catch(() => undefined);
          throw new Error(`migration ${source.owner}/${file.name} failed: ${(err as Error).message}`, { cause: err });
        }
      }
    }
  } finally {
    if (!lost) {
      await client.query('select pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => undefined);
      await client.query('reset statement_timeout').catch(() => undefined);
    }
    client.removeListener('error', onError);
    client.release(lost);
  }
  return applied;
}
