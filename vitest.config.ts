import { readdirSync, existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

// Tests import workspace packages from their TypeScript sources, so a test
// run never sees a stale dist/.
function workspaceAliases() {
  const alias: Record<string, string> = {};
  const roots = ['packages', 'packages/windows', 'apps'];
  for (const root of roots) {
    if (!existsSync(root)) continue;
    for (const dir of readdirSync(root)) {
      const pkgFile = join(root, dir, 'package.json');
      const entry = join(root, dir, 'src', 'index.ts');
      if (!existsSync(pkgFile) || !existsSync(entry)) continue;
      const name = JSON.parse(readFileSync(pkgFile, 'utf8')).name as string;
      alias[name] = resolve(entry);
    }
  }
  return alias;
}

export default defineConfig({
  resolve: { alias: workspaceAliases() },
  test: {
    include: ['packages/**/src/**/*.test.ts', 'apps/**/src/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    globalSetup: ['packages/testing/src/global-setup.ts'],
    testTimeout: 60000,
    hookTimeout: 60000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
