import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// core/src is grouped by concern (README, "Where things are"), and imports
// run one way: a room imports only rooms below it. An import back up is how
// a folder layout turns into one folder with extra steps.

const src = dirname(fileURLToPath(import.meta.url));
/** Lowest first; the entry files at the root may import any room. */
const ROOMS = ['plan', 'context', 'commit', ['gate', 'windows', 'joins'], 'runner'] as const;
const floorOf = (room: string) => ROOMS.findIndex((r) => (Array.isArray(r) ? r.includes(room) : r === room));

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

describe('core/src rooms', () => {
  it('every source file is in a room (or is an entry at the root), and no import runs back up', () => {
    const backUp: string[] = [];
    for (const file of sources(src)) {
      const from = relative(src, file).split('/');
      if (from.length === 1) {
        expect(['index.ts', 'stream.ts'], `${from[0]} belongs in a room`).toContain(from[0]);
        continue;
      }
      expect(floorOf(from[0]!), `${from[0]} is not a room`).toBeGreaterThanOrEqual(0);
      for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.{1,2}\/[^']+)\.js'/g)) {
        const to = relative(src, normalize(join(dirname(file), m[1]!))).split('/');
        if (to.length > 1 && to[0] !== from[0] && floorOf(to[0]!) > floorOf(from[0]!)) backUp.push(`${from.join('/')} -> ${to.join('/')}`);
      }
    }
    expect(backUp).toEqual([]);
  });
});
