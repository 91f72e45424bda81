import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';
import { migrate, type MigrationSource } from './migrate.js';

// The function step: after the migrations, under their lock, each function
// file whose text changed since it was applied is run again (all changed
// files in one transaction), and its checksum recorded in queen.function_files.

let b: TestBroker;
let dir: string;
let source: MigrationSource;
beforeAll(async () => {
  b = await startTestBroker();
  dir = await mkdtemp(join(tmpdir(), 'queen-functions-'));
  await mkdir(join(dir, 'sql'));
  source = { owner: 'functions-test', dir, functions: join(dir, 'sql') };
});
afterAll(async () => {
  await b?.stop();
  await rm(dir, { recursive: true, force: true });
});

const call = async (sql: string) => (await b.sql.query(sql)).rows[0];

describe('the function step', () => {
  it('creates every function after the migrations, then only the changed files, in any order of dependence', async () => {
    await writeFile(join(dir, '001_t.sql'), 'create table public.fn_t (id int);\ninsert into public.fn_t values (1), (2);\n');
    // a SQL-language function naming one whose file comes later in name order
    await writeFile(join(dir, 'sql', 'public.a_total_v1.sql'), 'create or replace function public.a_total_v1() returns bigint language sql as $$ select public.b_sum_v1() * 10 $$;\n');
    await writeFile(join(dir, 'sql', 'public.b_sum_v1.sql'), 'create or replace function public.b_sum_v1() returns bigint language sql as $$ select sum(id) from public.fn_t $$;\n');
    expect(await migrate(b.sql, [source])).toEqual(['functions-test/001_t.sql', 'functions-test/functions/public.a_total_v1.sql', 'functions-test/functions/public.b_sum_v1.sql']);
    expect(await call('select public.a_total_v1() as v')).toEqual({ v: '30' });
    expect(await migrate(b.sql, [source])).toEqual([]);

    await writeFile(join(dir, 'sql', 'public.b_sum_v1.sql'), 'create or replace function public.b_sum_v1() returns bigint language sql as $$ select sum(id) + 1 from public.fn_t $$;\n');
    expect(await migrate(b.sql, [source])).toEqual(['functions-test/functions/public.b_sum_v1.sql']);
    expect(await call('select public.a_total_v1() as v')).toEqual({ v: '40' });
  });

  it('applies none of the changed files when one fails, and names it', async () => {
    await writeFile(join(dir, 'sql', 'public.a_total_v1.sql'), 'create or replace function public.a_total_v1() returns bigint language sql as $$ select public.b_sum_v1() * 100 $$;\n');
    // a changed result type: create or replace cannot, a migration must drop the old one first
    await writeFile(join(dir, 'sql', 'public.b_sum_v1.sql'), 'create or replace function public.b_sum_v1() returns text language sql as $$ select sum(id)::text from public.fn_t $$;\n');
    await expect(migrate(b.sql, [source])).rejects.toThrow(/function file functions-test\/public.b_sum_v1.sql failed: cannot change return type/);
    expect(await call('select public.a_total_v1() as v')).toEqual({ v: '40' });

    await writeFile(join(dir, '002_drop_b_sum.sql'), 'drop function if exists public.b_sum_v1();\n');
    await writeFile(join(dir, 'sql', 'public.a_total_v1.sql'), 'create or replace function public.a_total_v1() returns bigint language sql as $$ select public.b_sum_v1()::bigint * 100 $$;\n');
    expect(await migrate(b.sql, [source])).toEqual(['functions-test/002_drop_b_sum.sql', 'functions-test/functions/public.a_total_v1.sql', 'functions-test/functions/public.b_sum_v1.sql']);
    expect(await call('select public.a_total_v1() as v, pg_typeof(public.b_sum_v1())::text as t')).toEqual({ v: '300', t: 'text' });
  });

  it('forgets a deleted file (its function dropped by a migration)', async () => {
    await writeFile(join(dir, '003_drop_a_total.sql'), 'drop function if exists public.a_total_v1();\n');
    await rm(join(dir, 'sql', 'public.a_total_v1.sql'));
    expect(await migrate(b.sql, [source])).toEqual(['functions-test/003_drop_a_total.sql']);
    const { rows } = await b.sql.query('select name from queen.function_files where owner = $1', [source.owner]);
    expect(rows).toEqual([{ name: 'public.b_sum_v1.sql' }]);
  });
});
