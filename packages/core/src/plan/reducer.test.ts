import { describe, expect, it } from 'vitest';
import { aggregateReducer, reduceReducer } from './reducer.js';

function fold(r: ReturnType<typeof aggregateReducer>, inputs: unknown[]) {
  let acc = r.init();
  for (const i of inputs) acc = r.add(JSON.parse(JSON.stringify(acc)), i); // a JSON round trip between adds, like state rows
  return r.result(acc);
}

describe('reducers', () => {
  it('S27 aggregate semantics over numbers', () => {
    const r = aggregateReducer({ count: () => 1, sum: (m: any) => m.x, min: (m: any) => m.x, max: (m: any) => m.x, avg: (m: any) => m.x });
    expect(fold(r, [10, 5, 30, 2, 3].map((x) => ({ x })))).toEqual({ count: 5, sum: 50, min: 2, max: 30, avg: 10 });
  });

  it('S27 aggregate ignores non-numbers; min/max/avg are null until a number arrives', () => {
    const r = aggregateReducer({ count: () => 1, sum: (m: any) => m.x, min: (m: any) => m.x, max: (m: any) => m.x, avg: (m: any) => m.x });
    expect(fold(r, [4, 'x', null, 6].map((x) => ({ x })))).toEqual({ count: 4, sum: 10, min: 4, max: 6, avg: 5 });
    expect(fold(r, [{ x: 'a' }])).toEqual({ count: 1, sum: 0, min: null, max: null, avg: null });
    // count adds its extractor's numeric result, else 1; unknown names sum numbers
    const c = aggregateReducer({ count: (m: any) => m.n, total: (m: any) => m.n });
    expect(fold(c, [{ n: 3 }, { n: 'z' }, {}])).toEqual({ count: 5, total: 3 });
  });

  it('S28 reduce: scalar accumulators emit {value}, object accumulators are independent per window', () => {
    const scalar = reduceReducer((a: number, v: any) => a + v.n, 0);
    let acc = scalar.init();
    for (const n of [1, 2, 3]) acc = scalar.add(acc, { n });
    expect(scalar.result(acc)).toEqual({ value: 6 });

    const obj = reduceReducer((a: { n: number }, v: any) => {
      a.n += v.n;
      return a;
    }, { n: 0 });
    const w1 = obj.add(obj.init(), { n: 5 });
    const w2 = obj.init();
    expect(w1).toEqual({ n: 5 });
    expect(w2).toEqual({ n: 0 });
    expect(obj.result(w1)).toEqual({ n: 5 });
  });
});
