#!/usr/bin/env node
// Bundles the console UI (src/ui) into dist/ui: one script, one style sheet,
// the page. Run by `npm run build` after tsc has type-checked src/ui. The
// route table (method, path, level of each route) is taken from the built
// @queen-mq/protocol and baked into the script, so the page never writes a
// URL or a level by hand.
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
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
copyFileSync(join(root, 'src', 'ui', 'index.html'), join(out, 'index.html'));
// One style sheet: the charting library's (uPlot) first, then ours, which may override it.
const chartCss = readFileSync(createRequire(import.meta.url).resolve('uplot/dist/uPlot.min.css'), 'utf8');
writeFileSync(join(out, 'console.css'), `${chartCss}\n${readFileSync(join(root, 'src', 'ui', 'console.css'), 'utf8')}`);
