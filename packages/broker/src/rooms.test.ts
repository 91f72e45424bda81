import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// broker/src is grouped by concern (README, "Rooms"), and imports run one
// way: a room imports only rooms below it, and no room imports the entry
// files at the root. An import back up is how a folder layout turns into
// one folder with extra steps.

const src = dirname(fileURLToPath(import.meta.url));
/** Lowest first; rooms on one floor may not import each other. The entry files at the root may import any room. */
const ROOMS = ['db', ['sql', 'metrics', 'wait'], 'context', 'http', 'log', 'streams', 'maintenance', 'admin'] as const;
const ENTRIES = ['index.ts', 'broker.ts', 'app.ts'];
const floorOf = (room: string) => ROOMS.findIndex((r) => (Array.isArray(r) ? r.includes(room) : r === room));

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

/** Each relative import of `file`, as a path from src split into its parts (`import`, `export ... from`, `import()`). */
function importsOf(file: string): string[][] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from\s+|import\s*\(\s*)'(\.{1,2}\/[^']+)'/g)].map((m) => relative(src, normalize(join(dirname(file), m[1]!))).split('/'));
}

describe('broker/src rooms', () => {
  it('every source file is in a room (or is an entry at the root), and no import runs back up or across a floor', () => {
    const wrong: string[] = [];
    for (const file of sources(src)) {
      const from = relative(src, file).split('/');
      if (from.length === 1) {
        expect(ENTRIES, `${from[0]} belongs in a room`).toContain(from[0]);
        continue;
      }
      const floor = floorOf(from[0]!);
      expect(floor, `${from[0]} is not a room`).toBeGreaterThanOrEqual(0);
      for (const to of importsOf(file)) {
        if (to[0] === from[0]) continue;
        if (to.length === 1 || floorOf(to[0]!) >= floor) wrong.push(`${from.join('/')} -> ${to.join('/')}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
