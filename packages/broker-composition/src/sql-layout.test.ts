import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokerMigrations, checksumList, checksumOf, functionFiles, migrate, type MigrationSource } from '@queen-mq/broker';
import { freshDatabase, startTestBroker, type TestBroker } from '@queen-mq/testing';
import { brokerComposition } from './index.js';

// The SQL a deployed broker runs has one current view: tables, indexes and
// constraints from the numbered migrations (their result committed as
// schema.sql), every function from its own file in src/sql. These tests hold
// a migrated database to that view: each function is what its file says and
// no other exists; the schema is the committed snapshot; and a database built
// by the migrations as they were before the functions moved out of them
// (main at af5385a, kept in fixtures/) upgrades to the same functions and
// schema, its data intact.

const sources: MigrationSource[] = [brokerMigrations, ...brokerComposition().migrations];
const SCHEMAS = ['queen', 'queen_streams', 'kv'];
const SNAPSHOT = fileURLToPath(new URL('../schema.sql', import.meta.url));
/** The last commit whose migrations still defined the functions. */
const BEFORE = 'af5385a';

type Queryable = Pick<pg.ClientBase, 'query'>;

/** Every function of our schemas: `schema.name(identity args)` → pg_get_functiondef. */
async function functionDefinitions(db: Queryable): Promise<Map<string, string>> {
  const { rows } = await db.query<{ sig: string; def: string }>(
    `select n.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as sig, pg_get_functiondef(p.oid) as def
       from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = any($1) order by 1`,
    [SCHEMAS],
  );
  return new Map(rows.map((r) => [r.sig, r.def]));
}

/**
 * What the files make of the database's functions: inside a transaction that
 * is rolled back, every function of our schemas is dropped and every file
 * run. Equal to the functions before only when each is what its file says,
 * none exists that no file defines and no file defines one that is missing.
 */
async function functionsFromFiles(db: pg.Pool): Promise<Map<string, string>> {
  const client = await db.connect();
  try {
    await client.query('begin');
    const before = await functionDefinitions(client);
    for (const sig of before.keys()) {
      const [, schema, name, args] = /^([^.]+)\.([^(]+)\((.*)\)$/.exec(sig)!;
      // cascade: a trigger or default using one goes too, and comes back with the rollback
      await client.query(`drop function if exists ${pg.escapeIdentifier(schema!)}.${pg.escapeIdentifier(name!)}(${args}) cascade`);
    }
    await client.query('set local check_function_bodies = off');
    for (const source of sources) for (const file of await functionFiles(source)) await client.query(await readFile(file.path, 'utf8'));
    return await functionDefinitions(client);
  } finally {
    await client.query('rollback');
    client.release();
  }
}

/**
 * The function files that cannot be applied on a database that already has
 * their functions, as the runner does whenever a file changes: each file run
 * twice, under a savepoint, in a transaction rolled back. Answers
 * `name: error` for each that failed.
 */
async function notReapplicable(db: pg.Pool, files: { name: string; path: string }[]): Promise<string[]> {
  const client = await db.connect();
  const failed: string[] = [];
  try {
    await client.query('begin');
    await client.query('set local check_function_bodies = off');
    for (const file of files) {
      const sql = await readFile(file.path, 'utf8');
      await client.query('savepoint file');
      try {
        await client.query(sql);
        await client.query(sql);
        await client.query('release savepoint file');
      } catch (err) {
        failed.push(`${file.name}: ${(err as Error).message}`);
        await client.query('rollback to savepoint file');
      }
    }
  } finally {
    await client.query('rollback');
    client.release();
  }
  return failed;
}

/**
 * Tables with their columns, then each table's constraints and indexes, then
 * sequences, of our schemas: one line each, in an order that does not depend
 * on the database's collation.
 */
async function schemaSnapshot(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ line: string }>(
    `select line from (
     select c.oid::regclass::text as rel, 0 as kind, 'table ' || c.oid::regclass::text || ' (' || string_agg(
              quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
              || case when a.attcollation not in (0, (select oid from pg_collation where collname = 'default')) then ' collate ' || (select quote_ident(collname) from pg_collation where oid = a.attcollation) else '' end
              || case when a.attnotnull then ' not null' else '' end
              || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), ''), ', ' order by a.attnum) || ')' as line
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
       left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
      where n.nspname = any($1) and c.relkind in ('r', 'p')
      group by c.oid
     union all
     select c.conrelid::regclass::text, 1, '  constraint ' || quote_ident(c.conname) || ' ' || pg_get_constraintdef(c.oid)
       from pg_constraint c join pg_namespace n on n.oid = c.connamespace
      where n.nspname = any($1) and c.contype <> 'n'
     union all
     select i.indrelid::regclass::text, 2, '  ' || pg_get_indexdef(i.indexrelid)
       from pg_index i join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = any($1)
     union all
     select '~', 3, 'sequence ' || c.oid::regclass::text
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = any($1) and c.relkind = 'S'
     ) x order by rel collate "C", kind, line collate "C"`,
    [SCHEMAS],
  );
  return (
    '-- The tables, constraints, indexes and sequences the migrations make, checked by\n' +
    '-- packages/broker-composition/src/sql-layout.test.ts. A schema change shows here as a\n' +
    '-- diff; after a new migration rewrite it with that test and -u, and review the diff.\n' +
    rows.map((r) => r.line).join('\n') +
    '\n'
  );
}

describe('a freshly migrated database', () => {
  let b: TestBroker;
  beforeAll(async () => {
    b = await startTestBroker({ ...brokerComposition() });
  });
  afterAll(async () => {
    await b?.stop();
  });

  it('has each function as its file defines it, and no other', async () => {
    const live = await functionDefinitions(b.sql);
    expect(live.size).toBeGreaterThan(40);
    expect(await functionsFromFiles(b.sql)).toEqual(live);
  });

  it('recorded every function file with its checksum', async () => {
    const { rows } = await b.sql.query<{ owner: string; name: string; checksum: string }>('select owner, name, checksum from queen.function_files');
    const files: { owner: string; name: string; checksum: string }[] = [];
    for (const source of sources) for (const f of await functionFiles(source)) files.push({ owner: source.owner, name: f.name, checksum: checksumOf(await readFile(f.path, 'utf8')) });
    const key = (r: { owner: string; name: string }) => `${r.owner}/${r.name}`;
    const sorted = (list: typeof files) => [...list].sort((x, y) => (key(x) < key(y) ? -1 : 1));
    expect(sorted(rows)).toEqual(sorted(files));
    // Nothing changed: the next start re-creates nothing.
    expect(await migrate(b.sql, sources)).toEqual([]);
  });

  it('applies each function file again, twice, on a database that has its function', async () => {
    const files: { name: string; path: string }[] = [];
    for (const source of sources) files.push(...(await functionFiles(source)));
    expect(files.length).toBeGreaterThan(40);
    expect(await notReapplicable(b.sql, files)).toEqual([]);
    // The check fails on a file that cannot: a plain create of a function the database has.
    const dir = await mkdtemp(join(tmpdir(), 'queen-reapply-'));
    try {
      const path = join(dir, 'queen.iso.sql');
      const iso = await readFile(join(sources[0]!.functions!, 'queen.iso.sql'), 'utf8');
      expect(iso).toMatch(/create or replace function/);
      await writeFile(path, iso.replace(/create or replace function/i, 'create function'));
      expect(await notReapplicable(b.sql, [{ name: 'queen.iso.sql', path }])).toEqual([expect.stringMatching(/^queen\.iso\.sql: function "iso" already exists/)]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await functionsFromFiles(b.sql)).toEqual(await functionDefinitions(b.sql));
  });

  it('matches the committed schema snapshot (schema.sql)', async () => {
    await expect(await schemaSnapshot(b.sql)).toMatchFileSnapshot(SNAPSHOT);
  });

  it('a drifted function is seen: one edited in the database, one no file defines', async () => {
    const client = await b.sql.connect();
    try {
      await client.query('begin');
      await client.query(`create or replace function queen.iso(ts timestamptz) returns text language sql immutable as $$ select 'drift' $$`);
      await client.query(`create function queen.nobody_defines_v1() returns int language sql as $$ select 1 $$`);
      const live = await functionDefinitions(client);
      await client.query('commit');
      try {
        const fromFiles = await functionsFromFiles(b.sql);
        expect(fromFiles).not.toEqual(live);
        expect(fromFiles.has('queen.nobody_defines_v1()')).toBe(false);
        expect(fromFiles.get('queen.iso(ts timestamp with time zone)')).not.toEqual(live.get('queen.iso(ts timestamp with time zone)'));
      } finally {
        await client.query('drop function queen.nobody_defines_v1()');
        // The step re-creates only changed files: put the edited one back from its file.
        await client.query(await readFile(join(sources[0]!.functions!, 'queen.iso.sql'), 'utf8'));
      }
    } finally {
      client.release();
    }
    expect(await functionsFromFiles(b.sql)).toEqual(await functionDefinitions(b.sql));
  });
});

/**
 * A source's migration folder as it was at BEFORE, kept under
 * fixtures/migrations-<commit>/<owner> (a shallow clone has no history to
 * read it from). Each file is the text REWRITTEN lists for it.
 */
async function migrationsBefore(source: MigrationSource): Promise<MigrationSource> {
  const dir = fileURLToPath(new URL(`../fixtures/migrations-${BEFORE}/${source.owner}`, import.meta.url));
  const rewritten = await checksumList(source, 'REWRITTEN');
  const names = (await readdir(dir)).filter((n) => /^\d+_.*\.sql$/.test(n)).sort();
  expect(names).toEqual([...rewritten.keys()].sort());
  for (const name of names) expect(checksumOf(await readFile(join(dir, name), 'utf8')), `${source.owner}/${name}`).toBe(rewritten.get(name));
  return { owner: source.owner, dir };
}

/** Every row of every table of our schemas (as jsonb objects: a column a later migration added is one more key). */
async function tableContents(db: Queryable): Promise<Record<string, Record<string, unknown>[]>> {
  const { rows: tables } = await db.query<{ t: string }>(
    `select c.oid::regclass::text as t from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = any($1) and c.relkind in ('r', 'p') and c.relname not in ('migrations', 'function_files', 'schema_version') order by 1`,
    [SCHEMAS],
  );
  const out: Record<string, Record<string, unknown>[]> = {};
  for (const { t } of tables) out[t] = (await db.query<{ r: Record<string, unknown> }>(`select to_jsonb(x) as r from ${t} x order by x::text`)).rows.map((r) => r.r);
  return out;
}

describe(`a database migrated by main as of ${BEFORE}`, () => {
  let url: string;
  let old: pg.Pool;
  let b: TestBroker | undefined;
  beforeAll(async () => {
    url = await freshDatabase();
    old = new pg.Pool({ connectionString: url, max: 2 });
    old.on('error', () => undefined);
  });
  afterAll(async () => {
    await b?.stop();
    await old?.end();
  });

  it('upgrades to the functions of the files and the committed schema, its data intact, and serves it', async () => {
    const before: MigrationSource[] = [];
    for (const source of sources) before.push(await migrationsBefore(source));
    expect(await migrate(old, before)).toContain('broker/018_ack_run.sql');

    // Data written by the functions as they were then: a queue, messages, an ack, a KV key.
    const [part] = (await old.query(`select * from queen.ensure_partitions_v1('[{"queue":"upgrade-q","partition":"p"}]')`)).rows;
    const items = Array.from({ length: 5 }, (_, i) => ({ partition_id: part.partition_id, payload: { n: i }, transaction_id: `tx-${i}` }));
    await old.query('select * from queen.log_append_v1($1, $2::jsonb, null)', [part.partition_id, JSON.stringify(items)]);
    await old.query(`insert into queen.kv (namespace, key, value, version) values ('upgrade', 'k', '"v"', nextval('queen.kv_version_seq'))`);
    const data = await tableContents(old);
    expect(data['queen.messages']).toHaveLength(5);
    const oldFunctions = await functionDefinitions(old);
    expect(oldFunctions.size).toBeGreaterThan(40);

    // The broker of today starts on it: the rewritten migrations are taken
    // as applied (REWRITTEN), new ones run, every function comes from its file.
    b = await startTestBroker({ databaseUrl: url, ...brokerComposition() });
    const { rows: checksums } = await old.query<{ owner: string; name: string; checksum: string }>('select owner, name, checksum from queen.migrations order by owner, name');
    for (const row of checksums) {
      const source = sources.find((s) => s.owner === row.owner)!;
      expect(row.checksum, `${row.owner}/${row.name}`).toBe(checksumOf(await readFile(join(source.dir, row.name), 'utf8')));
    }
    // Every row as it was in the columns it had; tables added since are there, empty.
    const after = await tableContents(old);
    const asBefore = (t: string) => after[t]!.map((r) => Object.fromEntries(Object.keys(data[t]![0] ?? r).map((k) => [k, r[k]])));
    expect(Object.fromEntries(Object.keys(data).map((t) => [t, asBefore(t)]))).toEqual(data);
    // Columns added since, as their migration filled them in: the partition's
    // oldest retained message (030).
    expect(after['queen.partitions']!.map((r) => r.retained_since)).toEqual([data['queen.messages']![0]!.created_at]);
    // The history's one-row state (032) is made with its row; every other new table is empty.
    expect(after['queen.history_state']).toEqual([{ one: true, sampled_at: '-infinity' }]);
    for (const t of Object.keys(after).filter((t) => !(t in data) && t !== 'queen.history_state')) expect(after[t], t).toEqual([]);
    const live = await functionDefinitions(old);
    expect(await functionsFromFiles(old)).toEqual(live);
    // The functions a fresh database has, the same text.
    const fresh = await startTestBroker({ ...brokerComposition() });
    try {
      expect(live).toEqual(await functionDefinitions(fresh.sql));
      expect(await schemaSnapshot(old)).toEqual(await schemaSnapshot(fresh.sql));
    } finally {
      await fresh.stop();
    }

    // And it serves what the old functions wrote.
    const pop = await b.http('GET', '/api/v1/pop/queue/upgrade-q?batch=10&wait=false');
    expect(pop.status).toBe(200);
    expect(pop.body.messages.map((m: { data: { n: number } }) => m.data.n)).toEqual([0, 1, 2, 3, 4]);
    const ack = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: pop.body.messages.map((m: { transactionId: string; partitionId: string; leaseId?: string }) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed' })),
      consumerGroup: '__QUEUE_MODE__',
    });
    expect(ack.status).toBe(200);
    expect((await b.http('GET', '/api/v1/kv/upgrade/k')).body).toMatchObject({ value: 'v' });
  });
});
