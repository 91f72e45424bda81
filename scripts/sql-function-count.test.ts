import { describe, expect, it } from 'vitest';
import { countSqlFunctions } from './sql-function-count.mjs'; // plain JavaScript: also run by node

// Issue 30: each SQL function of the broker's schemas has one definition in
// the repository, its file in a package's src/sql. A change to a function is
// an edit of that file, never a restatement in a migration.

describe('SQL function definitions', () => {
  it('every function of queen, queen_streams and kv is defined exactly once, in src/sql', () => {
    const list = countSqlFunctions() as { fn: string; count: number; at: string[] }[];
    expect(list.length).toBeGreaterThan(40);
    expect(list.filter((f) => f.count !== 1).map((f) => `${f.fn}: ${f.at.join(', ')}`)).toEqual([]);
    expect(list.filter((f) => !/^packages\/[a-z-]+\/src\/sql\//.test(f.at[0]!)).map((f) => `${f.fn}: ${f.at[0]}`)).toEqual([]);
  });
});
