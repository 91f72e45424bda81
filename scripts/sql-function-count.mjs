#!/usr/bin/env node
// Three checks of the SQL functions of the broker's schemas (queen,
// queen_streams, kv), read from the repository as text:
//
// 1. Each function is defined once, in its file under a package's src/sql:
//    every `create function` or `create or replace function` statement in a
//    .sql file, or in a source file's SQL text (tests aside: the drift test
//    makes a drifted copy on purpose), counted by schema, name and argument
//    types. A second definition (a migration restating it, a copy in a test)
//    is reported.
// 2. A function file says `create or replace`: the migration runner applies
//    a file again whenever its text changes, on databases that already have
//    the function, so a plain `create function` would stop every existing
//    database's broker at its next start ("already exists").
// 3. Every function is on a path the product runs: named by the packages' or
//    apps' source (tests, benches and comments aside), by a migration (a
//    column default, say), or by a function so named. One that nothing calls
//    is dead SQL: remove its file and drop it in a migration. The exception
//    is a shim kept for the brokers of the previous release during a rolling
//    upgrade (docs/operations.md): its file says `-- shim for release X.Y.Z`,
//    and the test holds X.Y.Z to one of the last two releases.
//
// `node scripts/sql-function-count.mjs` prints every function with its count
// and where it is defined, then what checks 2 and 3 found, and exits 1 when
// any check fails; --json prints the lists. scripts/sql-function-count.test.ts
// runs it in `npm test`.
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceFiles } from './source-files.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FILES = /\.(sql|ts|mts|mjs|js)$/;
const SCHEMAS = new Set(['queen', 'queen_streams', 'kv']);
const DEFINITION = /\bcreate\s+(?:or\s+replace\s+)?function\s+"?([a-z_][a-z_0-9]*)"?\s*\.\s*"?([a-z_][a-z_0-9]*)"?\s*\(/gi;
/** A definition without `or replace`. */
const PLAIN_CREATE = /\bcreate\s+function\b/gi;
/** A function file: packages/<name>/src/sql/<schema>.<name>.sql. */
const FUNCTION_FILE = /^packages\/[a-z-]+\/src\/sql\/[a-z_]+\.[a-z_0-9]+\.sql$/;
/** Where the product's code lives: what it names is called. */
const PRODUCT = /^(packages|apps)\//;
const TEST = /\.test\.[a-z]+$|(^|\/)(test|tests|__tests__|fixtures)\//;
/** A function file's mark of a shim: kept for the brokers of that release. */
const SHIM = /^-- shim for release (\d+\.\d+\.\d+)\b/m;
/** `schema.name`, a possible call of a function. */
const REFERENCE = /\b(queen|queen_streams|kv)\s*\.\s*"?([a-z_][a-z_0-9]*)"?/gi;

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

/** The definitions of our schemas' functions in a text: `schema.name(types)` with the line each starts on. */
export function definitionsIn(text) {
  const out = [];
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
    out.push({
      fn: `${schema}.${m[2].toLowerCase()}(${argumentTypes(text.slice(m.index + m[0].length, end - 1))})`,
      name: `${schema}.${m[2].toLowerCase()}`,
      line: text.slice(0, m.index).split('\n').length,
    });
  }
  return out;
}

/** The lines of a function file's text that define a function with a plain `create function` (no `or replace`). */
export function plainCreatesIn(text) {
  return [...stripSqlComments(text).matchAll(PLAIN_CREATE)].map((m) => text.slice(0, m.index).split('\n').length);
}

function stripSqlComments(text) {
  // Same length, so offsets and line numbers still hold.
  return text.replace(/--[^\n]*/g, (c) => ' '.repeat(c.length)).replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' '));
}

function stripScriptComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' ')).replace(/(^|[^:\\'"`])\/\/[^\n]*/g, (c, lead) => lead + ' '.repeat(c.length - lead.length));
}

/** The function names (`schema.name`) a text of code names, its definitions, drops and comments aside. */
export function referencesIn(text, isSql) {
  const code = (isSql ? stripSqlComments(text) : stripScriptComments(text))
    .replace(DEFINITION, ' ')
    .replace(/\bdrop\s+function\s+(if\s+exists\s+)?/gi, 'DROPPED ');
  const names = new Set();
  for (const m of code.matchAll(REFERENCE)) {
    if (/DROPPED\s*$/.test(code.slice(Math.max(0, m.index - 10), m.index))) continue;
    names.add(`${m[1].toLowerCase()}.${m[2].toLowerCase()}`);
  }
  return names;
}

const files = () =>
  sourceFiles(root, FILES)
    .map((path) => ({ path, rel: relative(root, path) }))
    .filter((f) => !f.rel.startsWith('scripts/sql-function-count.'));

/** Every definition found: `schema.name(types)` → the files (with line) defining it. */
export function countSqlFunctions() {
  const defs = new Map();
  for (const { path, rel } of files()) {
    if (TEST.test(rel)) continue;
    for (const d of definitionsIn(readFileSync(path, 'utf8'))) {
      if (!defs.has(d.fn)) defs.set(d.fn, []);
      defs.get(d.fn).push(`${rel}:${d.line}`);
    }
  }
  return [...defs].map(([fn, at]) => ({ fn, count: at.length, at })).sort((a, b) => (a.fn < b.fn ? -1 : 1));
}

/** Every plain `create function` in a function file, as `file:line`. */
export function plainCreates() {
  const out = [];
  for (const { path, rel } of files()) {
    if (!FUNCTION_FILE.test(rel)) continue;
    for (const line of plainCreatesIn(readFileSync(path, 'utf8'))) out.push(`${rel}:${line}`);
  }
  return out;
}

/**
 * The functions defined in src/sql that no path of the product reaches: not
 * named by the packages' or apps' code (tests aside) or by a migration, nor
 * by a function so reached. `calls` maps each function file's functions to
 * the names its own text calls, `roots` holds the names the rest names.
 */
export function uncalledFunctions({ functions, roots }) {
  const reached = new Set();
  const queue = [...roots].filter((n) => functions.has(n));
  for (const n of queue) reached.add(n);
  while (queue.length) {
    const n = queue.pop();
    for (const callee of functions.get(n) ?? []) {
      if (functions.has(callee) && !reached.has(callee)) {
        reached.add(callee);
        queue.push(callee);
      }
    }
  }
  return [...functions.keys()].filter((n) => !reached.has(n)).sort();
}

/** The repository's call graph: each src/sql function → what its file calls, and what the product's other code names (shims included, by release). */
export function callGraph() {
  const functions = new Map();
  const roots = new Set();
  const shims = new Map();
  for (const { path, rel } of files()) {
    if (!PRODUCT.test(rel) || TEST.test(rel)) continue;
    const text = readFileSync(path, 'utf8');
    const isSql = rel.endsWith('.sql');
    if (FUNCTION_FILE.test(rel)) {
      const refs = referencesIn(text, true);
      const shim = SHIM.exec(text);
      for (const d of definitionsIn(text)) {
        if (shim) {
          shims.set(d.name, shim[1]);
          roots.add(d.name);
        }
        const own = new Set([...refs].filter((r) => r !== d.name));
        functions.set(d.name, new Set([...(functions.get(d.name) ?? []), ...own]));
      }
    } else {
      for (const r of referencesIn(text, isSql)) roots.add(r);
    }
  }
  return { functions, roots, shims };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const list = countSqlFunctions();
  const plain = plainCreates();
  const uncalled = uncalledFunctions(callGraph());
  if (process.argv.includes('--json')) console.log(JSON.stringify({ functions: list, plainCreates: plain, uncalled }, null, 2));
  else {
    for (const { fn, count, at } of list) console.log(`${count}  ${fn}  ${at.join(' ')}`);
    const over = list.filter((f) => f.count !== 1);
    console.log(`${list.length} functions, ${list.reduce((n, f) => n + f.count, 0)} definitions; ${over.length} defined more than once`);
    for (const at of plain) console.log(`plain create function (say create or replace): ${at}`);
    for (const fn of uncalled) console.log(`called by nothing the product runs: ${fn}`);
    for (const [fn, release] of callGraph().shims) console.log(`shim for the brokers of release ${release}: ${fn}`);
    console.log(`${plain.length} plain create function; ${uncalled.length} called by nothing`);
  }
  process.exitCode = list.some((f) => f.count !== 1) || plain.length || uncalled.length ? 1 : 0;
}
