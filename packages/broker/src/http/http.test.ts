import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from './http.js';

// The depth guard of the body parser: pure, so tested without a broker.
describe('nestsDeeperThan', () => {
  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);

  it('counts nesting, not brackets: many shallow siblings pass', () => {
    const siblings = JSON.stringify({ items: Array.from({ length: 5000 }, (_, i) => ({ n: i, tags: [i] })) });
    expect(nestsDeeperThan(siblings, 10)).toBe(false);
    expect(nestsDeeperThan(JSON.stringify({ a: [{ b: [{ c: [] }] }], pad: 'x'.repeat(50) }), 5)).toBe(true);
  });

  it('answers true just past the limit and false at it', () => {
    expect(nestsDeeperThan(deep(1000), 1000)).toBe(false);
    expect(nestsDeeperThan(deep(1001), 1000)).toBe(true);
    expect(nestsDeeperThan(`{"a":${deep(1001)}}`, 1000)).toBe(true);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    const inString = JSON.stringify({ s: '['.repeat(3000), t: '\\"[[[[' + '{'.repeat(2000) });
    expect(nestsDeeperThan(inString, 1000)).toBe(false);
    // A string ending in a backslash: its closing quote is not escaped.
    expect(nestsDeeperThan(JSON.stringify({ s: 'a\\', d: [[[]]] }), 3)).toBe(true);
    expect(nestsDeeperThan(JSON.stringify({ s: 'a\\', d: [[[]]] }), 4)).toBe(false);
  });
});
