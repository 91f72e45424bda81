// The repository's own files below `dir` whose name matches `pattern`:
// node_modules, dist, dot-folders and .d.ts files left out. Shared by the
// scripts that read the source as text (unused-exports, sql-function-count).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function sourceFiles(dir, pattern, out = []) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, pattern, out);
    else if (pattern.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}
