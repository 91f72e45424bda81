#!/usr/bin/env node
// Writes the generated half of docs/protocol.md (the route and error
// reference) from the built @queen-mq/protocol: `node scripts/protocol-doc.mjs`
// after `npm run build`. With --check it only compares and exits 1 when the
// file is stale (the protocol package's test does the same).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allRoutes, errorCatalogue, protocolReference } from '@queen-mq/protocol';

const file = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'protocol.md');
const START = '<!-- generated:start (scripts/protocol-doc.mjs) -->';
const END = '<!-- generated:end -->';
const text = readFileSync(file, 'utf8');
const [head, rest] = text.split(START);
if (rest === undefined || !rest.includes(END)) throw new Error(`${file} lacks the ${START} … ${END} markers`);
const tail = rest.slice(rest.indexOf(END));
const next = `${head}${START}\n${protocolReference(allRoutes, errorCatalogue)}${tail}`;
if (process.argv.includes('--check')) {
  if (next !== text) {
    console.error('docs/protocol.md is stale: run `node scripts/protocol-doc.mjs`');
    process.exit(1);
  }
} else if (next !== text) {
  writeFileSync(file, next);
  console.error('docs/protocol.md updated');
}
