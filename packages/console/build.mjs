#!/usr/bin/env node
// Bundles the console UI (src/ui) into dist/ui: one script, one style sheet,
// the page. Run by `npm run build` after tsc has type-checked src/ui. The
// route table (method, path, level of each route) is taken from the built
// @queen-mq/protocol and baked into the script, so the page never writes a
// URL or a level by hand.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { allRoutes } from '@queen-mq/protocol';

const root = dirname(fileURLToPath(import.meta.url));
const out = join(root, 'dist', 'ui');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const table = Object.fromEntries(Object.entries(allRoutes).map(([name, r]) => [name, { method: r.method, url: r.url, level: r.level }]));

await build({
  entryPoints: [join(root, 'src', 'ui', 'main.tsx')],
  outfile: join(out, 'console.js'),
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  minify: true,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  define: { QUEEN_ROUTES: JSON.stringify(table) },
  legalComments: 'none',
  logLevel: 'warning',
});
for (const file of ['index.html', 'console.css']) copyFileSync(join(root, 'src', 'ui', file), join(out, file));
