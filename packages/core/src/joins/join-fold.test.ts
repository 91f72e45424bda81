import { describe, expect, it } from 'vitest';
import { expireJoin, foldJoin, joinExpiresAt, joinStateKeys, type JoinInput } from './join-fold.js';
import { resolveJoinOptions } from '../plan/join-options.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateRow } from '../context/wire.js';
import { JOIN_CLOCK_KEY } from '../plan/keys.js';

// The join fold against a model that shares none of its code: for random
// records of both sides (keys, event times out of order, some late), cut into
// random batches and interleaved at random, the outputs over all cycles are
// exactly the model's: every couple of non-late records with equal keys and
// times at most `within` apart, once; in a left join, every non-late left
// record that paired with nothing and whose bound the right side's last
// watermark has passed, once with null.

/** A seeded PRNG (mulberry32): a failing seed replays. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Rec {
  offset: string;
  k: string;
  t: number;
}

const msg = (r: Rec): SourceMessage => ({ offset: r.offset, data: r, createdAt: new Date(r.t).toISOString() }) as unknown as SourceMessage;

function model(left: Rec[], right: Rec[], withinMs: number, graceMs: number, type: 'inner' | 'left'): string[] {
  const notLate = (side: Rec[]) => {
    let max = -Infinity;
    return side.filter((r) => {
      const ok = !(r.t < max - graceMs);
      if (ok) max = Math.max(max, r.t);
      return ok;
    });
  };
  const L = notLate(left);
  const R = notLate(right);
  const out: string[] = [];
  for (const l of L) {
    let paired = false;
    for (const r of R) {
      if (l.k === r.k && Math.abs(l.t - r.t) <= withinMs) {
        out.push(`${l.offset}+${r.offset}`);
        paired = true;
      }
    }
    const markR = R.length ? Math.max(...R.map((r) => r.t)) : null;
    if (type === 'left' && !paired && markR !== null && markR - graceMs > l.t + withinMs) out.push(`${l.offset}+null`);
  }
  return out.sort();
}

/** `keysFirst`: fold as the join cycle does, on the rows of the batch's keys first and on every row only when asked. */
function run(seed: number, type: 'inner' | 'left', keysFirst = false) {
  const rand = rng(seed);
  const withinMs = 1000 * (1 + Math.floor(rand() * 5));
  const graceMs = 1000 * Math.floor(rand() * 3);
  const side = (n: number): Rec[] => {
    let t = 0;
    return Array.from({ length: n }, (_, i) => {
      t += Math.floor(rand() * 2500) - 500; // mostly forward, sometimes back (some of those late)
      return { offset: String(i + 1), k: `k${Math.floor(rand() * 3)}`, t };
    });
  };
  const left = side(5 + Math.floor(rand() * 30));
  const right = side(5 + Math.floor(rand() * 30));
  const opts = resolveJoinOptions({ within: { ms: withinMs }, gracePeriod: graceMs / 1000, key: (d: Rec) => d.k, eventTime: (d: Rec) => d.t, type, select: (l: Rec, r: Rec | null) => `${l.offset}+${r ? r.offset : 'null'}` });

  // The shard's rows as the broker keeps them (versions from one counter).
  const rows = new Map<string, StateRow>();
  let version = 0;
  const outputs: string[] = [];
  let partialFolds = 0;
  let i = 0;
  let j = 0;
  while (i < left.length || j < right.length) {
    const inputs: JoinInput[] = [];
    const takeLeft = j >= right.length || (i < left.length && rand() < 0.5);
    const both = rand() < 0.3;
    if (takeLeft || both) {
      const n = 1 + Math.floor(rand() * 6);
      if (i < left.length) inputs.push({ side: 'left', messages: left.slice(i, i + n).map(msg) });
      i = Math.min(left.length, i + n);
    }
    if (!takeLeft || both) {
      const n = 1 + Math.floor(rand() * 6);
      if (j < right.length) inputs.push({ side: 'right', messages: right.slice(j, j + n).map(msg) });
      j = Math.min(right.length, j + n);
    }
    let fold = keysFirst ? foldJoin(opts, new Map(joinStateKeys(opts, inputs).flatMap((k) => (rows.has(k) ? [[k, rows.get(k)!] as const] : []))), inputs, 'p', false) : foldJoin(opts, rows, inputs, 'p');
    if (fold.needsAllRows) fold = foldJoin(opts, rows, inputs, 'p');
    else if (keysFirst) partialFolds++;
    for (const op of fold.stateOps) {
      expect(op.expected_version).toBe(rows.get(op.key)?.version ?? 0);
      if (op.type === 'delete') rows.delete(op.key);
      else rows.set(op.key, { key: op.key, value: JSON.parse(JSON.stringify(op.value)), version: ++version } as StateRow);
    }
    outputs.push(...fold.outputs.map((o) => o.value as string));
  }
  return { outputs: outputs.sort(), expected: model(left, right, withinMs, graceMs, type), rows, withinMs, graceMs, partialFolds };
}

describe('join fold', () => {
  it('inner join: 300 seeded schedules, the pairs are the model\'s, each once', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const { outputs, expected } = run(seed, 'inner');
      expect(outputs, `seed ${seed}`).toEqual(expected);
    }
  });

  it('left join: 300 seeded schedules, pairs and expired unmatched left records, each once', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const { outputs, expected } = run(seed, 'left');
      expect(outputs, `seed ${seed}`).toEqual(expected);
    }
  });

  it("a cycle reading only its keys' rows (every row when a held record may leave) folds exactly as one reading every row", () => {
    let partial = 0;
    for (const type of ['inner', 'left'] as const) {
      for (let seed = 1; seed <= 300; seed++) {
        const everyRow = run(seed, type);
        const keysFirst = run(seed, type, true);
        expect(keysFirst.outputs, `${type} seed ${seed}`).toEqual(everyRow.outputs);
        expect(keysFirst.rows, `${type} seed ${seed}`).toEqual(everyRow.rows);
        partial += keysFirst.partialFolds;
      }
    }
    // The path under test was taken: many cycles had no record to expire.
    expect(partial).toBeGreaterThan(500);
  });

  it('holds only records whose bound the other side has not passed (state is bounded by the other side\'s time)', () => {
    for (let seed = 1; seed <= 50; seed++) {
      const { rows, withinMs, graceMs } = run(seed, 'left');
      const clock = rows.get(JOIN_CLOCK_KEY)!.value;
      for (const [key, row] of rows) {
        if (key === JOIN_CLOCK_KEY) continue;
        const otherMark = key.includes('\u001fleft\u001f') ? clock.right : clock.left;
        for (const r of row.value.records) expect(otherMark - graceMs <= r.time + withinMs, `seed ${seed} ${key}`).toBe(true);
      }
    }
  });

  it('a shard written before `due` was kept is read whole by its next cycle', () => {
    const opts = resolveJoinOptions({ within: { seconds: 1 }, key: () => 'k' });
    const old = new Map([[JOIN_CLOCK_KEY, { key: JOIN_CLOCK_KEY, value: { left: 1000, right: null, partition: 'p' }, version: 3 } as StateRow]]);
    const input = [{ side: 'right' as const, messages: [{ offset: '1', data: {}, createdAt: new Date(5000).toISOString() } as unknown as SourceMessage] }];
    expect(foldJoin(opts, old, input, 'p', false).needsAllRows).toBe(true);
    expect(foldJoin(opts, old, input, 'p').needsAllRows).toBe(false);
  });

  it('processing time pairs on createdAt; a record behind its side by more than the grace is late', () => {
    const opts = resolveJoinOptions({ within: { seconds: 1 }, gracePeriod: 0, key: () => 'k' });
    const at = (offset: string, t: number) => ({ offset, data: {}, createdAt: new Date(t).toISOString() }) as unknown as SourceMessage;
    const fold = foldJoin(opts, new Map(), [
      { side: 'left', messages: [at('1', 10_000), at('2', 8_000)] },
      { side: 'right', messages: [at('1', 10_500), at('2', 12_000)] },
    ], 'p');
    expect(fold.late).toBe(1);
    expect(fold.outputs.map((o) => o.identity)).toEqual(['pair\u001f1\u001f1']);
    // The right side's 12 s is past the left record's bound (10 s + 1 s): it left; the right records wait for the left side.
    expect(fold.held).toEqual({ left: 0, right: 2 });
  });

  it("processing time, 300 seeded schedules with idle expiries between cycles: the pairs are the model's, and once the clock passes every bound each unpaired left record is emitted and nothing is held", () => {
    let expiries = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const rand = rng(seed);
      const withinMs = 500 * (1 + Math.floor(rand() * 4));
      const graceMs = 500 * Math.floor(rand() * 3);
      const type = rand() < 0.5 ? ('inner' as const) : ('left' as const);
      // createdAt never decreases in a partition: each side's times go forward, sometimes in long quiet gaps.
      const side = (n: number): Rec[] => {
        let t = 0;
        return Array.from({ length: n }, (_, i) => ({ offset: String(i + 1), k: `k${Math.floor(rand() * 3)}`, t: (t += rand() < 0.2 ? 3000 + Math.floor(rand() * 5000) : Math.floor(rand() * 400)) }));
      };
      const left = side(3 + Math.floor(rand() * 25));
      const right = side(3 + Math.floor(rand() * 25));
      const opts = resolveJoinOptions({ within: { ms: withinMs }, gracePeriod: graceMs / 1000, key: (d: Rec) => d.k, type, select: (l: Rec, r: Rec | null) => `${l.offset}+${r ? r.offset : 'null'}` });
      const rows = new Map<string, StateRow>();
      let version = 0;
      const outputs: string[] = [];
      const apply = (fold: ReturnType<typeof foldJoin>) => {
        for (const op of fold.stateOps) {
          expect(op.expected_version).toBe(rows.get(op.key)?.version ?? 0);
          if (op.type === 'delete') rows.delete(op.key);
          else rows.set(op.key, { key: op.key, value: JSON.parse(JSON.stringify(op.value)), version: ++version } as StateRow);
        }
        outputs.push(...fold.outputs.map((o) => o.value as string));
      };
      let i = 0;
      let j = 0;
      let clock = 0;
      while (i < left.length || j < right.length) {
        const inputs: JoinInput[] = [];
        if (i < left.length && (j >= right.length || rand() < 0.5)) {
          const n = 1 + Math.floor(rand() * 4);
          inputs.push({ side: 'left', messages: left.slice(i, i + n).map(msg) });
          i = Math.min(left.length, i + n);
        } else {
          const n = 1 + Math.floor(rand() * 4);
          inputs.push({ side: 'right', messages: right.slice(j, j + n).map(msg) });
          j = Math.min(right.length, j + n);
        }
        apply(foldJoin(opts, rows, inputs, 'p'));
        for (const { messages } of inputs) for (const m of messages) clock = Math.max(clock, Date.parse(m.createdAt));
        // An idle flush the guard lets through: the clock is past every consumed record, and no pending one is
        // stamped more than the grace before it.
        const pending = Math.min(left[i]?.t ?? Infinity, right[j]?.t ?? Infinity);
        const now = Math.min(clock + Math.floor(rand() * 4000), pending + graceMs);
        if (now >= clock && rand() < 0.6) {
          const expiresAt = joinExpiresAt(opts, rows.get(JOIN_CLOCK_KEY)?.value);
          if (expiresAt !== null && expiresAt !== undefined && expiresAt < now) expiries++;
          apply(expireJoin(opts, rows, 'p', now));
          clock = now;
        }
      }
      // The queues stay quiet: the clock passes every bound.
      apply(expireJoin(opts, rows, 'p', clock + withinMs + graceMs + 1));
      const everyBoundPassed = model(left, right, withinMs, graceMs, 'inner').concat(
        type === 'left' ? left.filter((l) => !right.some((r) => r.k === l.k && Math.abs(l.t - r.t) <= withinMs)).map((l) => `${l.offset}+null`) : [],
      );
      expect(outputs.sort(), `seed ${seed}`).toEqual(everyBoundPassed.sort());
      expect([...rows.keys()], `seed ${seed}`).toEqual([JOIN_CLOCK_KEY]);
      expect(joinExpiresAt(opts, rows.get(JOIN_CLOCK_KEY)!.value), `seed ${seed}`).toBeNull();
    }
    // The path under test was taken: idle expiries let records go between cycles.
    expect(expiries).toBeGreaterThan(100);
  });
});
