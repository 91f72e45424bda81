#!/usr/bin/env node
// `npm run bench`: runs every benchmark script in bench/ one after another,
// each in its own process (so one's broker, PostgreSQL and memory never colour
// the next), and each writes its own bench/results/<name>.json.
//   node bench/run.mjs            all of them
//   node bench/run.mjs broker     only bench/broker.mjs (names without .mjs)
//   node bench/run.mjs scale --queues 2000
//                                 options after the names go to each selected script
// A benchmark is any bench/*.mjs except this dispatcher, the soak test
// (`npm run soak`) and helpers whose name starts with "_".
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const NOT_BENCHMARKS = new Set(['run.mjs', 'soak.mjs']);
const all = readdirSync(here)
  .filter((f) => f.endsWith('.mjs') && !f.startsWith('_') && !NOT_BENCHMARKS.has(f))
  .map((f) => f.slice(0, -'.mjs'.length))
  // broker first: the baseline the others are read against.
  .sort((a, b) => (a === 'broker' ? -1 : b === 'broker' ? 1 : a.localeCompare(b)));

const argv = process.argv.slice(2);
const firstOption = argv.findIndex((a) => a.startsWith('-'));
const wanted = firstOption === -1 ? argv : argv.slice(0, firstOption);
const options = firstOption === -1 ? [] : argv.slice(firstOption);
const unknown = wanted.filter((w) => !all.includes(w));
if (unknown.length) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; available: ${all.join(', ')}`);
  process.exit(2);
}
const selected = wanted.length ? wanted : all;

const failed = [];
for (const name of selected) {
  const started = Date.now();
  process.stderr.write(`\n=== bench/${name}.mjs ===\n`);
  const run = spawnSync(process.execPath, [join(here, `${name}.mjs`), ...options], { stdio: 'inherit', env: process.env });
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  if (run.status !== 0) failed.push(name);
  process.stderr.write(`=== ${name}: ${run.status === 0 ? 'done' : `FAILED (exit ${run.status ?? run.signal})`} in ${seconds}s ===\n`);
}
if (failed.length) {
  console.error(`\nfailed: ${failed.join(', ')}`);
  process.exit(1);
}
