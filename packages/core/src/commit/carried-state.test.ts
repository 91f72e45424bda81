import { describe, expect, it } from 'vitest';
import type { RunnerContext } from '../context/runner-context.js';
import { carriedRows, carryRows, forgetCarried } from './carried-state.js';

// What a runner carries from one window cycle to the next on a partition
// (the compare-and-set that makes it safe is tested in window-cycle.test.ts).

const rt = () => ({}) as RunnerContext;
const row = (key: string, version: number, value: unknown) => ({ key, value, version });

describe('carried window state', () => {
  it('applies the ops at the versions answered, for the batch that starts after the last ack only', () => {
    const r = rt();
    carryRows(r, 'p', '41', [row('a', 1, { n: 1 }), row('b', 2, { n: 2 })], [
      { type: 'upsert', key: 'a', value: { n: 5, when: new Date(0), gone: undefined }, expected_version: 1 },
      { type: 'delete', key: 'b', expected_version: 2 },
      { type: 'upsert', key: 'c', value: { n: 1 }, expected_version: 0 },
    ], new Map([['a', 7], ['b', null], ['c', 8]]));
    expect(carriedRows(r, 'p', '41')).toBeUndefined();
    expect(carriedRows(r, 'p', '43')).toBeUndefined();
    // Values as jsonb keeps them: a Date as its text, an undefined field gone.
    expect(carriedRows(r, 'p', '42')).toEqual([
      { key: 'a', value: { n: 5, when: '1970-01-01T00:00:00.000Z' }, version: 7 },
      { key: 'c', value: { n: 1 }, version: 8 },
    ]);
    forgetCarried(r, 'p');
    expect(carriedRows(r, 'p', '42')).toBeUndefined();
  });

  it('carries nothing when an upsert has no version in the answer', () => {
    const r = rt();
    carryRows(r, 'p', '1', [], [{ type: 'upsert', key: 'a', value: 1, expected_version: 0 }], new Map());
    expect(carriedRows(r, 'p', '2')).toBeUndefined();
  });

  it('keeps at most 1024 partitions, dropping the one carried longest ago', () => {
    const r = rt();
    for (let i = 0; i <= 1024; i++) carryRows(r, `p${i}`, '1', [], [], new Map());
    expect(carriedRows(r, 'p0', '2')).toBeUndefined();
    expect(carriedRows(r, 'p1', '2')).toEqual([]);
    expect(carriedRows(r, 'p1024', '2')).toEqual([]);
  });
});
