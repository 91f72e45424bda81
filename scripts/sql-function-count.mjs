#!/usr/bin/env node
// Counts the definitions of each SQL function of the broker's schemas
// (queen, queen_streams, kv) across the repository: every `create function`
// or `create or replace function` statement in a .sql file, or in a source
// file's SQL text (tests aside: the drift test makes a drifted copy on
// purpose), by schema, name and argument types. Since issue 30 each
// function is defined once, in its file under a package's src/sql; a second
// definition (a migration restating it, a copy in a test) is what this
// reports.
//
// `node scripts/sql-function-count.mjs` prints every function with its count
// and where it is defined, and exits 1 when any count is not 1; --json prints
// the list. scripts/sql-function-count.test.ts runs it in `npm test`.
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceFiles } from './source-files.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FILES = /\.(sql|ts|mts|mjs|js)$/;
const SCHEMAS = new Set(['queen', 'queen_streams', 'kv']);
const DEFINITION = /\bcreate\s+(?:or\s+replace\s+)?function\s+"?([a-z_][a-z_0-9]*)"?\s*\.\s*"?([a-z_][a-z_0-9]*)"?\s*\(/gi;


/** The argument types of a parameter list: names, modes and defaults left out, case and spaces normalised. */
function argumentTypes(list) {
  const args = [];
  let depth = 0;
  let current = '';
  for (const ch of list) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      args.push(current);
      current = '';
    } else current += ch;
  }
  if (current.trim()) args.push(current);
  return args
    .map((a) => a.replace(/\s+(default\s|=).*$/is, '').trim().toLowerCase().replace(/\s+/g, ' '))
    .filter((a) => !/^out\s/.test(a))
    .map((a) => a.replace(/^(in|inout|variadic)\s+/, ''))
    // a leading word followed by a type is the parameter's name (p_group text); a lone type has none
    .map((a) => (/^[a-z_][a-z_0-9]*\s+\S/.test(a) && !/^(double precision|character varying|timestamp|time|bit varying)\b/.test(a) ? a.replace(/^[a-z_][a-z_0-9]*\s+/, '') : a))
    .join(', ');
}

/** Every definition found: `schema.name(types)` → the files (with line) defining it. */
export function countSqlFunctions() {
  const defs = new Map();
  for (const path of sourceFiles(root, FILES)) {
    if (relative(root, path) === 'scripts/sql-function-count.mjs' || /\.test\.[a-z]+$/.test(path)) continue;
    const text = readFileSync(path, 'utf8');
    for (const m of text.matchAll(DEFINITION)) {
      const schema = m[1].toLowerCase();
      if (!SCHEMAS.has(schema)) continue;
      let depth = 1;
      let end = m.index + m[0].length;
      while (end < text.length && depth) {
        if (text[end] === '(') depth++;
        else if (text[end] === ')') depth--;
        end++;
      }
      const key = `${schema}.${m[2].toLowerCase()}(${argumentTypes(text.slice(m.index + m[0].length, end - 1))})`;
      const line = text.slice(0, m.index).split('\n').length;
      if (!defs.has(key)) defs.set(key, []);
      defs.get(key).push(`${relative(root, path)}:${line}`);
    }
  }
  return [...defs].map(([fn, at]) => ({ fn, count: at.length, at })).sort((a, b) => (a.fn < b.fn ? -1 : 1));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const list = countSqlFunctions();
  if (process.argv.includes('--json')) console.log(JSON.stringify(list, null, 2));
  else {
    for (const { fn, count, at } of list) console.log(`${count}  ${fn}  ${at.join(' ')}`);
    const over = list.filter((f) => f.count !== 1);
    console.log(`${list.length} functions, ${list.reduce((n, f) => n + f.count, 0)} definitions; ${over.length} defined more than once`);
  }
  process.exitCode = list.some((f) => f.count !== 1) ? 1 : 0;
}
