#!/usr/bin/env node
// Run after `tsc` in a package's build script: marks every `bin` of the
// package.json in the current directory executable. tsc writes its output
// 0644, and npm links a bin only once the file exists (after `npm ci`, which
// in a fresh clone runs before the build), so nobody else sets the mode.
// A bin whose file the build did not produce fails the build here.
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';

const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
const bins = typeof pkg.bin === 'string' ? { [pkg.name]: pkg.bin } : (pkg.bin ?? {});
let failed = false;
for (const [name, target] of Object.entries(bins)) {
  const file = resolve(target);
  let stat;
  try {
    stat = statSync(file);
  } catch {
    console.error(`${pkg.name}: bin "${name}" points at ${target}, which the build did not produce`);
    failed = true;
    continue;
  }
  chmodSync(file, stat.mode | 0o111);
}
process.exit(failed ? 1 : 0);
