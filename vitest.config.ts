import { readdirSync, existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

// Tests import workspace packages from their TypeScript sources, so a test
// run never sees a stale dist/. Subpath exports (`@queen-mq/kv/broker`) map
// to their own source file; each alias matches its specifier exactly, since a
// plain prefix alias would turn `@queen-mq/kv/broker` into `.../index.ts/broker`.
function workspaceAliases() {
  const alias: { find: RegExp; replacement: string }[] = [];
  const exact = (specifier: string) => new RegExp(`^${specifier.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`);
  const roots = ['packages', 'packages/windows', 'apps'];
  for (const root of roots) {
    if (!existsSync(root)) continue;
    for (const dir of readdirSync(root)) {
      const pkgFile = join(root, dir, 'package.json');
      if (!existsSync(pkgFile)) continue;
      const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { name: string; exports?: Record<string, { default?: string }> };
      for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
        // ./dist/broker.js is built from ./src/broker.ts
        const source = target.default?.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts');
        if (!source || !existsSync(join(root, dir, source))) continue;
        alias.push({ find: exact(pkg.name + subpath.slice(1)), replacement: resolve(root, dir, source) });
      }
    }
  }
  return alias;
}

export default defineConfig({
  resolve: { alias: workspaceAliases() },
  test: {
    include: ['packages/**/src/**/*.test.ts', 'apps/**/src/**/*.test.ts', 'tools/**/*.test.ts', 'scripts/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    globalSetup: ['packages/testing/src/global-setup.ts'],
    testTimeout: 60000,
    hookTimeout: 60000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
