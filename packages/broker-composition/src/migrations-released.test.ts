import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { brokerMigrations, checksumList, checksumOf, type MigrationSource } from '@queen-mq/broker';
import { brokerComposition } from './index.js';

// The migration policy as a test: a released migration (listed with its
// sha256 in its folder's RELEASED) never changes, and nothing is numbered
// in among the released ones. A table change is a new migration; a function
// change is an edit of its file in src/sql. RELEASED names each release
// (`# release 0.2.0`): the last is the version of the package that owns the
// folder, and the root CHANGELOG.md has a section for it.

const CHANGELOG = fileURLToPath(new URL('../../../CHANGELOG.md', import.meta.url));

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

  it('names the release of its package: the last release line is the package.json version, with a CHANGELOG section', async () => {
    const text = await readFile(join(source.dir, 'RELEASED'), 'utf8');
    const releases = [...text.matchAll(/^# release (\d+\.\d+\.\d+)$/gm)].map((m) => m[1]!);
    expect(releases.length).toBeGreaterThan(0);
    const version = JSON.parse(await readFile(join(source.dir, '..', 'package.json'), 'utf8')).version as string;
    expect(releases.at(-1), `${source.owner}: RELEASED's last release line`).toBe(version);
    // Every listed migration comes after the first release line: none shipped unnamed.
    expect(text.slice(0, text.indexOf('# release ')).match(/^[0-9a-f]{64}\s/m)).toBeNull();
    const changelog = await readFile(CHANGELOG, 'utf8');
    for (const r of releases) expect(changelog, `CHANGELOG.md section for ${r}`).toMatch(new RegExp(`^## \\[${r.replace(/\./g, '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`, 'm'));
  });

  it('lists in REWRITTEN only released migrations', async () => {
    const released = await checksumList(source, 'RELEASED');
    for (const name of (await checksumList(source, 'REWRITTEN')).keys()) expect(released.has(name), name).toBe(true);
  });
});
