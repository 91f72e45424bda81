import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { brokerMigrations, checksumList, checksumOf, type MigrationSource } from '@queen-mq/broker';
import { brokerComposition } from './index.js';

// The migration policy as a test: a released migration (listed with its
// sha256 in its folder's RELEASED) never changes, and nothing is numbered
// in among the released ones. A table change is a new migration; a function
// change is an edit of its file in src/sql.

const sources: MigrationSource[] = [brokerMigrations, ...brokerComposition().migrations];

describe.each(sources.map((s) => [s.owner, s] as const))('the released migrations of %s', (_owner, source) => {
  it('are each as released, and no migration is numbered in among them', async () => {
    const released = await checksumList(source, 'RELEASED');
    expect(released.size).toBeGreaterThan(0);
    const files = (await readdir(source.dir)).filter((f) => /^\d+_.*\.sql$/.test(f)).sort();
    for (const [name, checksum] of released) {
      expect(files, `RELEASED lists ${name}`).toContain(name);
      expect(checksumOf(await readFile(join(source.dir, name), 'utf8')), `${source.owner}/${name} changed after its release: put the change in a new migration, or a function's in its src/sql file`).toBe(checksum);
    }
    const last = Math.max(...[...released.keys()].map((n) => Number.parseInt(n, 10)));
    const unlisted = files.filter((f) => !released.has(f) && Number.parseInt(f, 10) <= last);
    expect(unlisted, `numbered at or below the last released migration (${last}): take the next free number`).toEqual([]);
  });

  it('lists in REWRITTEN only released migrations', async () => {
    const released = await checksumList(source, 'RELEASED');
    for (const name of (await checksumList(source, 'REWRITTEN')).keys()) expect(released.has(name), name).toBe(true);
  });
});
