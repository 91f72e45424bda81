import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
// plain JavaScript: also run by node
import { callGraph, countSqlFunctions, plainCreates, plainCreatesIn, referencesIn, uncalledFunctions } from './sql-function-count.mjs';

// Each SQL function of the broker's schemas has one definition in the
// repository, its file in a package's src/sql, which the migration runner
// can apply again on a database that has it (create or replace), and which
// something the product runs calls. A change to a function is an edit of
// that file, never a restatement in a migration.

type Graph = { functions: Map<string, Set<string>>; roots: Set<string>; shims: Map<string, string> };

/** The broker's releases, oldest first, as its migrations/RELEASED names them. */
const releases = () => [...readFileSync(new URL('../packages/broker/migrations/RELEASED', import.meta.url), 'utf8').matchAll(/^# release (\S+)$/gm)].map((m) => m[1]!);

describe('SQL function definitions', () => {
  it('every function of queen, queen_streams and kv is defined exactly once, in src/sql', () => {
    const list = countSqlFunctions() as { fn: string; count: number; at: string[] }[];
    expect(list.length).toBeGreaterThan(40);
    expect(list.filter((f) => f.count !== 1).map((f) => `${f.fn}: ${f.at.join(', ')}`)).toEqual([]);
    expect(list.filter((f) => !/^packages\/[a-z-]+\/src\/sql\//.test(f.at[0]!)).map((f) => `${f.fn}: ${f.at[0]}`)).toEqual([]);
  });

  it('no function file says a plain create function', () => {
    expect(plainCreates()).toEqual([]);
  });

  it('the check sees a plain create function, and not one in a comment or an or replace', () => {
    const file = [
      '-- A comment may say create function freely.',
      'create function queen.x_v1() returns int language sql as $$ select 1 $$;',
      'create or replace function queen.y_v1() returns int language sql as $$ select 1 $$;',
      'CREATE  FUNCTION queen.z_v1() returns int language sql as $$ select 1 $$;',
    ].join('\n');
    expect(plainCreatesIn(file)).toEqual([2, 4]);
  });

  it('every function in src/sql is on a path the product runs', () => {
    const graph = callGraph() as Graph;
    expect(graph.functions.size).toBeGreaterThan(40);
    expect(uncalledFunctions(graph)).toEqual([]);
  });

  it('a shim lives for the brokers of one of the last two releases only (the rolling-upgrade rule)', () => {
    const last = releases().slice(-2);
    expect(last.length).toBeGreaterThan(0);
    const stale = [...(callGraph() as Graph).shims].filter(([, release]) => !last.includes(release));
    expect(stale.map(([fn, release]) => `${fn}: shim for release ${release}, older than ${last.join(' and ')}: drop it`)).toEqual([]);
  });

  it('the check sees a function nothing calls, one called only by such a function, and ignores comments, drops and tests', () => {
    const graph = callGraph() as Graph;
    const functions = new Map(graph.functions);
    functions.set('queen.orphan_v1', new Set(['queen.orphan_helper_v1']));
    functions.set('queen.orphan_helper_v1', new Set());
    const before = new Set(uncalledFunctions(graph) as string[]);
    expect((uncalledFunctions({ functions, roots: graph.roots }) as string[]).filter((n) => !before.has(n))).toEqual(['queen.orphan_helper_v1', 'queen.orphan_v1']);
    // What does not count as a call.
    expect([...referencesIn('// queen.a_v1 in a comment\nconst s = "select queen.b_v1($1)"; /* queen.c_v1 */', false)]).toEqual(['queen.b_v1']);
    expect([...referencesIn('-- queen.a_v1\ndrop function if exists queen.d_v1(int);\nselect queen.b_v1();', true)]).toEqual(['queen.b_v1']);
  });
});
