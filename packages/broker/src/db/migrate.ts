import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

/**
 * A package's SQL: numbered migrations (`001_name.sql`: tables, indexes,
 * constraints, data moves, `drop function`s), applied once each in order,
 * and its functions (`<schema>.<name>.sql`, one file per function name, the
 * only definition of it), re-created after the migrations whenever the file
 * changed.
 */
export interface MigrationSource {
  owner: string;
  dir: string;
  /** The folder of the source's function files; none when the source has no functions. */
  functions?: string;
}

export const brokerMigrations: MigrationSource = {
  owner: 'broker',
  dir: fileURLToPath(new URL('../../migrations', import.meta.url)),
  // src/sql from src/ (tests) and from dist/ alike: the .sql files are not compiled.
  functions: fileURLToPath(new URL('../../src/sql', import.meta.url)),
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

/** The function files of a source, by name (`queen.log_ack_v2.sql`), in name order. */
export async function functionFiles(source: MigrationSource): Promise<{ name: string; path: string }[]> {
  if (!source.functions) return [];
  const names = (await readdir(source.functions)).filter((f) => /^[a-z_]+\.[a-z_0-9]+\.sql$/.test(f)).sort();
  return names.map((name) => ({ name, path: join(source.functions!, name) }));
}

/**
 * The checksums a file in a source's migration folder lists, by migration
 * name: `sha256sum` lines (`<sha256>  001_log.sql`), `#` comments. Empty when
 * the file does not exist. RELEASED and REWRITTEN are such lists.
 */
export async function checksumList(source: MigrationSource, file: string): Promise<Map<string, string>> {
  let text: string;
  try {
    text = await readFile(join(source.dir, file), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw err;
  }
  const list = new Map<string, string>();
  for (const line of text.split('\n')) {
    const entry = line.replace(/#.*/, '').trim();
    if (!entry) continue;
    const [checksum, name] = entry.split(/\s+/);
    if (!name || !checksum || !/^[0-9a-f]{64}$/.test(checksum)) throw new Error(`${source.owner} ${file}: not a "<sha256>  <name>" line: ${line}`);
    list.set(name, checksum);
  }
  return list;
}

/** SHA-256 of a migration's text, line endings normalised (a checkout on Windows is the same file). */
export function checksumOf(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

/**
 * An applied migration whose file changed since: the database may differ
 * from what the files describe, so the broker refuses to start rather than
 * run on a schema nobody can reproduce. Migrations are never edited in
 * place; a change is a new numbered file, or for a SQL function an edit of
 * its file (src/sql).
 */
export class MigrationChangedError extends Error {
  readonly code = 'MIGRATION_CHANGED';
  constructor(owner: string, name: string, applied: string, now: string) {
    super(
      `migration ${owner}/${name} was changed after it was applied to this database (applied sha256 ${applied.slice(0, 12)}…, file now ${now.slice(0, 12)}…). ` +
        'Restore the file as it was and put the change in a new numbered migration (a function change goes in its file under src/sql).',
    );
    this.name = 'MigrationChangedError';
  }
}

/**
 * Applies every unapplied migration of each source, in order, each in its own
 * transaction, then every function file that changed since it was last
 * applied, all under a session advisory lock so concurrent brokers starting
 * on one database do not race: the first does the work, the others wait for
 * the lock and then find nothing to do. Every applied migration's checksum is
 * compared with its file first (MigrationChangedError). Answers the names
 * applied (`broker/001_log.sql`, `broker/functions/queen.log_ack_v2.sql`).
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
      create table if not exists queen.schema_version (owner text primary key, version int not null);
      create table if not exists queen.function_files (owner text not null, name text not null, checksum text not null,
        applied_at timestamptz not null default now(), primary key (owner, name))`);
    for (const source of sources) applied.push(...(await applyMigrations(client, source)));
    // After every source's migrations: a migration may drop a function whose
    // file then creates it with its new signature.
    for (const source of sources) applied.push(...(await applyFunctions(client, source)));
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

async function applyMigrations(client: pg.PoolClient, source: MigrationSource): Promise<string[]> {
  const applied: string[] = [];
  const done = new Map(
    (await client.query<{ name: string; checksum: string | null }>('select name, checksum from queen.migrations where owner = $1', [source.owner])).rows.map((r) => [r.name, r.checksum]),
  );
  const rewritten = await checksumList(source, 'REWRITTEN');
  for (const file of await files(source)) {
    const sql = await readFile(file.path, 'utf8');
    const checksum = checksumOf(sql);
    if (done.has(file.name)) {
      const stored = done.get(file.name);
      // Applied by a build that kept no checksum: this file is taken as what
      // was applied. Applied as the text before its one rewrite (REWRITTEN
      // says why that is the same database): from now on, the file as it is.
      if (stored === null || (stored !== checksum && rewritten.get(file.name) === stored)) {
        await client.query('update queen.migrations set checksum = $3 where owner = $1 and name = $2', [source.owner, file.name, checksum]);
      } else if (stored !== checksum) throw new MigrationChangedError(source.owner, file.name, stored!, checksum);
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
  return applied;
}

/**
 * Re-creates the source's functions whose file changed since it was last
 * applied (checksum in queen.function_files), all in one transaction: a
 * broker reading the functions sees the old set or the new one. Bodies are
 * not checked at create time (check_function_bodies off), so a SQL-language
 * function may name one whose file comes later in name order; the drift test
 * (packages/broker-composition/src/sql-layout.test.ts) runs every function
 * file against a migrated database, and applies each twice on one that has
 * it. A file is applied again whenever it changes, so it says `create or
 * replace` (scripts/sql-function-count.mjs refuses a plain `create
 * function`). A file whose function changes its arguments or its result
 * needs a migration that drops the old one: `create or replace` cannot
 * change either and would leave the old signature behind.
 */
async function applyFunctions(client: pg.PoolClient, source: MigrationSource): Promise<string[]> {
  const list = await functionFiles(source);
  const done = new Map(
    (await client.query<{ name: string; checksum: string }>('select name, checksum from queen.function_files where owner = $1', [source.owner])).rows.map((r) => [r.name, r.checksum]),
  );
  const changed: { name: string; sql: string; checksum: string }[] = [];
  for (const file of list) {
    const sql = await readFile(file.path, 'utf8');
    const checksum = checksumOf(sql);
    if (done.get(file.name) !== checksum) changed.push({ name: file.name, sql, checksum });
  }
  const gone = [...done.keys()].filter((name) => !list.some((f) => f.name === name));
  if (!changed.length && !gone.length) return [];
  try {
    await client.query('begin');
    await client.query('set local check_function_bodies = off');
    for (const file of changed) {
      try {
        await client.query(file.sql);
      } catch (err) {
        throw new Error(`function file ${source.owner}/${file.name} failed: ${(err as Error).message}`, { cause: err });
      }
      await client.query(
        `insert into queen.function_files (owner, name, checksum) values ($1, $2, $3)
         on conflict (owner, name) do update set checksum = excluded.checksum, applied_at = now()`,
        [source.owner, file.name, file.checksum],
      );
    }
    // A deleted file's function was dropped by a migration (the drift test says so).
    if (gone.length) await client.query('delete from queen.function_files where owner = $1 and name = any($2)', [source.owner, gone]);
    await client.query('commit');
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  }
  return changed.map((f) => `${source.owner}/functions/${f.name}`);
}
