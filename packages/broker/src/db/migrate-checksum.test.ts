import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';
import { checksumOf, migrate, MigrationChangedError, type MigrationSource } from './migrate.js';

// Applied migrations carry a checksum: a file edited after it was applied is
// refused at boot with a clear error, instead of a database that silently
// differs from what the files describe.

let b: TestBroker;
let dir: string;
let source: MigrationSource;
beforeAll(async () => {
  b = await startTestBroker();
  dir = await mkdtemp(join(tmpdir(), 'queen-migrations-'));
  source = { owner: 'checksum-test', dir };
});
afterAll(async () => {
  await b?.stop();
  await rm(dir, { recursive: true, force: true });
});

const one = 'create table public.checksum_t (id int);\n';
const two = 'alter table public.checksum_t add column note text;\n';

describe('migration checksums', () => {
  it('records a checksum per applied file and refuses an applied file that changed', async () => {
    await writeFile(join(dir, '001_t.sql'), one);
    await writeFile(join(dir, '002_note.sql'), two);
    expect(await migrate(b.sql, [source])).toEqual(['checksum-test/001_t.sql', 'checksum-test/002_note.sql']);
    const { rows } = await b.sql.query('select name, checksum from queen.migrations where owner = $1 order by name', [source.owner]);
    expect(rows).toEqual([{ name: '001_t.sql', checksum: checksumOf(one) }, { name: '002_note.sql', checksum: checksumOf(two) }]);
    // The broker's own migrations carry theirs too.
    const broker = await b.sql.query(`select count(*)::int as n from queen.migrations where owner = 'broker' and checksum is null`);
    expect(broker.rows[0].n).toBe(0);

    expect(await migrate(b.sql, [source])).toEqual([]);
    await writeFile(join(dir, '001_t.sql'), one.replace('(id int)', '(id bigint)'));
    const err = await migrate(b.sql, [source]).catch((e) => e);
    expect(err).toBeInstanceOf(MigrationChangedError);
    expect(err.code).toBe('MIGRATION_CHANGED');
    expect(err.message).toContain('checksum-test/001_t.sql was changed after it was applied');
    // Nothing after the changed file was applied meanwhile.
    await writeFile(join(dir, '003_more.sql'), 'create table public.checksum_more (id int);\n');
    await expect(migrate(b.sql, [source])).rejects.toBeInstanceOf(MigrationChangedError);
    expect((await b.sql.query(`select to_regclass('public.checksum_more') as t`)).rows[0].t).toBeNull();

    // Restored as it was: accepted, and the new file applies.
    await writeFile(join(dir, '001_t.sql'), one.replace(/\n/g, '\r\n'));
    expect(await migrate(b.sql, [source])).toEqual(['checksum-test/003_more.sql']);
  });

  it('a database migrated before checksums existed gets them recorded from the files at the next boot', async () => {
    await b.sql.query('update queen.migrations set checksum = null where owner = $1', [source.owner]);
    expect(await migrate(b.sql, [source])).toEqual([]);
    const { rows } = await b.sql.query('select count(*)::int as n from queen.migrations where owner = $1 and checksum is not null', [source.owner]);
    expect(rows[0].n).toBe(3);
  });

  it('takes a rewritten migration as applied when REWRITTEN lists the checksum it was applied with, and only that one', async () => {
    const was = 'create table public.checksum_rw (id int);\ncreate function public.checksum_rw_f() returns int language sql as $$ select 1 $$;\n';
    const now = 'create table public.checksum_rw (id int);\n';
    await writeFile(join(dir, '004_rw.sql'), was);
    expect(await migrate(b.sql, [source])).toEqual(['checksum-test/004_rw.sql']);
    await writeFile(join(dir, '004_rw.sql'), now);
    await expect(migrate(b.sql, [source])).rejects.toBeInstanceOf(MigrationChangedError);
    await writeFile(join(dir, 'REWRITTEN'), `# why\n${checksumOf(was)}  004_rw.sql\n`);
    expect(await migrate(b.sql, [source])).toEqual([]);
    const { rows } = await b.sql.query('select checksum from queen.migrations where owner = $1 and name = $2', [source.owner, '004_rw.sql']);
    expect(rows[0].checksum).toBe(checksumOf(now));
    // Another edit is a change like any other.
    await writeFile(join(dir, '004_rw.sql'), now + '-- again\n');
    await expect(migrate(b.sql, [source])).rejects.toBeInstanceOf(MigrationChangedError);
    await writeFile(join(dir, '004_rw.sql'), now);
  });
});
