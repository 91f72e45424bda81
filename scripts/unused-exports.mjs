#!/usr/bin/env node
// Lists exports of the workspace packages that nothing imports: an export
// that no other file of the monorepo (packages, apps, benches, scripts,
// tests included) imports, directly or through a re-export, is dead surface.
// A package entry's exports count as used only when something imports them
// or when scripts/public-api.json lists them (API kept for users); a listed
// name uses what it re-exports.
//
// Syntax only (the TypeScript parser, no type checker): an import names the
// file and the names it takes; `export … from` and `export *` pass uses on
// to the file they re-export; `import * as`, `export * as` and dynamic
// `import()` use every export of their target.
//
// `node scripts/unused-exports.mjs` prints what it finds and exits 1 when any
// export is neither used nor listed, or the list names an export that is
// gone; --json prints {unused, stale} instead. scripts/unused-exports.test.ts
// runs it in `npm test`.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceFiles } from './source-files.mjs';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = /\.(ts|tsx|mts|mjs|js|jsx)$/;


/** The workspace packages: name → {dir, subpath → source file}. */
function workspacePackages() {
  const packages = new Map();
  for (const base of ['packages', 'packages/windows', 'apps']) {
    const dir = join(root, base);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      const pkgFile = join(dir, name, 'package.json');
      if (!existsSync(pkgFile)) continue;
      const pkg = JSON.parse(readFileSync(pkgFile, 'utf8'));
      const entries = new Map();
      const exportsField = pkg.exports ?? (pkg.main ? { '.': pkg.main } : {});
      for (const [subpath, target] of Object.entries(exportsField)) {
        const file = typeof target === 'string' ? target : target.default ?? target.import;
        if (typeof file !== 'string') continue;
        // ./dist/x.js is built from ./src/x.ts
        const source = join(dir, name, file.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'));
        if (existsSync(source)) entries.set(subpath, source);
      }
      packages.set(pkg.name, { dir: join(dir, name), entries, base });
    }
  }
  return packages;
}

function resolveRelative(from, spec) {
  const base = resolve(dirname(from), spec);
  // A package's bin imports its built dist/x.js, built from src/x.ts.
  const built = base.replace(/\/dist\/(.*)\.js$/, '/src/$1.ts');
  const candidates = [built, base.replace(/\.js$/, '.ts'), base.replace(/\.js$/, '.tsx'), base.replace(/\.mjs$/, '.mts'), base, `${base}.ts`, `${base}.tsx`, join(base, 'index.ts')];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

function resolveSpecifier(from, spec, packages) {
  if (spec.startsWith('.')) return resolveRelative(from, spec);
  const match = /^(@[^/]+\/[^/]+|[^@/][^/]*)(\/.*)?$/.exec(spec);
  if (!match) return undefined;
  const pkg = packages.get(match[1]);
  return pkg?.entries.get(`.${match[2] ?? ''}`);
}

/**
 * What one file declares and uses: its exported names, its re-exports
 * ({from, name, as} or {from, all}) and its uses ({file, name} or {file, all}).
 */
function scan(file, packages) {
  const text = readFileSync(file, 'utf8');
  const kind = /\.tsx$/.test(file) ? ts.ScriptKind.TSX : /\.jsx$/.test(file) ? ts.ScriptKind.JSX : /\.m?ts$/.test(file) ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const exported = new Set();
  const reexports = [];
  const uses = [];
  const target = (spec) => resolveSpecifier(file, spec, packages);
  const hasExport = (node) => ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  const isDefault = (node) => (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.DefaultKeyword);

  for (const stmt of sf.statements) {
    if (ts.isImportDeclaration(stmt) && ts.isStringLiteral(stmt.moduleSpecifier)) {
      const to = target(stmt.moduleSpecifier.text);
      const clause = stmt.importClause;
      if (!to || !clause) continue;
      if (clause.name) uses.push({ file: to, name: 'default' });
      const bindings = clause.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) uses.push({ file: to, all: true });
      else if (bindings) for (const el of bindings.elements) uses.push({ file: to, name: (el.propertyName ?? el.name).text });
    } else if (ts.isExportDeclaration(stmt)) {
      const from = stmt.moduleSpecifier && ts.isStringLiteral(stmt.moduleSpecifier) ? target(stmt.moduleSpecifier.text) : undefined;
      if (!stmt.exportClause) {
        if (from) reexports.push({ from, all: true });
      } else if (ts.isNamespaceExport(stmt.exportClause)) {
        exported.add(stmt.exportClause.name.text);
        if (from) uses.push({ file: from, all: true });
      } else {
        for (const el of stmt.exportClause.elements) {
          exported.add(el.name.text);
          if (from) reexports.push({ from, name: (el.propertyName ?? el.name).text, as: el.name.text });
        }
      }
    } else if (ts.isExportAssignment(stmt)) {
      exported.add('default');
    } else if (hasExport(stmt)) {
      if (isDefault(stmt)) exported.add('default');
      else if (ts.isVariableStatement(stmt)) {
        for (const d of stmt.declarationList.declarations) {
          if (ts.isIdentifier(d.name)) exported.add(d.name.text);
          else for (const el of d.name.elements) if (ts.isBindingElement(el) && ts.isIdentifier(el.name)) exported.add(el.name.text);
        }
      } else if (stmt.name && ts.isIdentifier(stmt.name)) exported.add(stmt.name.text);
    }
  }

  // import('x'), typeof import('x').Name and require-free dynamic loads anywhere in the file.
  const visit = (node) => {
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteralLike(node.arguments[0])) {
      const to = target(node.arguments[0].text);
      if (to) uses.push({ file: to, all: true });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      const to = target(node.argument.literal.text);
      if (to) uses.push(node.qualifier ? { file: to, name: ts.isIdentifier(node.qualifier) ? node.qualifier.text : node.qualifier.left.getText() } : { file: to, all: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return { exported, reexports, uses };
}

/** Every export of a workspace package's src/ that nothing imports and the allowlist does not name. */
export function findUnusedExports({ allowlist = readAllowlist() } = {}) {
  const packages = workspacePackages();
  const files = ['packages', 'apps', 'bench', 'scripts'].flatMap((d) => sourceFiles(join(root, d), SOURCE));
  const info = new Map(files.map((f) => [f, scan(f, packages)]));

  // Uses, passed on through re-exports until nothing new is marked.
  const used = new Map(); // file → Set of names ('*' = all)
  const queue = [];
  const mark = (file, name) => {
    let set = used.get(file);
    if (!set) used.set(file, (set = new Set()));
    if (set.has(name) || set.has('*')) return;
    set.add(name);
    queue.push([file, name]);
  };
  for (const [, i] of info) for (const u of i.uses) mark(u.file, u.all ? '*' : u.name);
  // Listed names are used by someone outside the monorepo: through the entry
  // that lists them, the files they come from are used too.
  for (const id of allowlist) {
    const [path, name] = id.split('#');
    if (info.has(join(root, path))) mark(join(root, path), name);
  }
  while (queue.length) {
    const [file, name] = queue.pop();
    const i = info.get(file);
    if (!i) continue;
    for (const r of i.reexports) {
      if (r.all) {
        if (name === '*' || !i.exported.has(name)) mark(r.from, name);
      } else if (name === '*' || r.as === name) mark(r.from, r.name);
    }
  }
  // `export *` makes a file's names its own exports too.
  const namesOf = (file, seen = new Set()) => {
    const i = info.get(file);
    if (!i || seen.has(file)) return new Set();
    seen.add(file);
    const names = new Set(i.exported);
    for (const r of i.reexports) if (r.all) for (const n of namesOf(r.from, seen)) if (n !== 'default') names.add(n);
    return names;
  };

  const entryFiles = new Set([...packages.values()].flatMap((p) => [...p.entries.values()]));
  const packagesEntry = (file) => entryFiles.has(file);
  const unused = [];
  for (const [name, pkg] of packages) {
    if (pkg.base === 'apps') continue;
    const entries = new Set(pkg.entries.values());
    for (const file of files) {
      if (!file.startsWith(join(pkg.dir, 'src') + '/') || /\.test\.[mc]?[jt]sx?$/.test(file)) continue;
      const marks = used.get(file) ?? new Set();
      const own = entries.has(file) ? namesOf(file) : info.get(file).exported;
      for (const exportName of own) {
        if (marks.has('*') || marks.has(exportName)) continue;
        unused.push({ package: name, file: relative(root, file), name: exportName });
      }
    }
  }
  // Entries naming an export that is gone (or a file that is): the list should drop them.
  const stale = [...allowlist].filter((id) => {
    const [path, name] = id.split('#');
    const file = join(root, path);
    return !info.has(file) || (name !== '*' && !(packagesEntry(file) ? namesOf(file) : info.get(file).exported).has(name));
  });
  return { unused, stale };
}

/**
 * scripts/public-api.json: {"<group>": {"<file>": ["name", ...]}}, "*" for
 * every export of the file; a group only says why (keys starting "//" are
 * comments).
 */
export function readAllowlist() {
  const file = join(root, 'scripts', 'public-api.json');
  if (!existsSync(file)) return new Set();
  const groups = JSON.parse(readFileSync(file, 'utf8'));
  const out = new Set();
  for (const [group, byFile] of Object.entries(groups)) {
    if (group.startsWith('//')) continue;
    for (const [path, names] of Object.entries(byFile)) for (const n of names) out.add(`${path}#${n}`);
  }
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { unused, stale } = findUnusedExports();
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify({ unused, stale }, null, 2));
  } else {
    for (const u of unused) console.log(`${u.file}: ${u.name}`);
    for (const s of stale) console.log(`stale allowlist entry (now used or gone): ${s}`);
    console.error(`${unused.length} unused export(s), ${stale.length} stale allowlist entr${stale.length === 1 ? 'y' : 'ies'}`);
  }
  process.exit(unused.length || stale.length ? 1 : 0);
}
