#!/usr/bin/env node
// Runs the whole vitest suite once and closes with the line CI reads:
// "N passed, N failed" from vitest's own JSON report (the real counts).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';

const report = 'test-results.json';
rmSync(report, { force: true });
const args = ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)];
const run = spawnSync('npx', args, { stdio: 'inherit', env: { ...process.env, NX_DAEMON: 'false' } });

let passed = 0;
let failed = 0;
let skipped = 0;
if (existsSync(report)) {
  const r = JSON.parse(readFileSync(report, 'utf8'));
  passed = r.numPassedTests ?? 0;
  failed = (r.numFailedTests ?? 0) + (r.numRuntimeErrorTests ?? 0);
  skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  // A file that fails to load has no tests to count: still a failure.
  for (const file of r.testResults ?? []) if (file.status === 'failed' && (file.assertionResults ?? []).length === 0) failed += 1;
} else {
  failed = 1;
}
const code = run.status === 0 && failed === 0 ? 0 : 1;
console.log(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(code);
