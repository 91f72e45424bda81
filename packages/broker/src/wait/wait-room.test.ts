import { describe, expect, it, vi } from 'vitest';
import { RECHECK_MS, SWEEP_LINES, WaitRoom, type LineProbe, type LineRef } from './wait-room.js';

// The wait room wakes the head of each line a write can feed, never the
// whole room: 1,000 parked pops and a one-message push is one pop, not 1,000.

/** Parks `n` waiters and records the order they resolve in. */
function parkMany(room: WaitRoom, n: number, queue = 'q', group = 'g', partition: string | null = null, ms = 60_000) {
  const woken: number[] = [];
  const done = Array.from({ length: n }, (_, i) => room.park(queue, group, partition, ms).then(() => woken.push(i)));
  return { woken, done };
}
const tick = () => new Promise((r) => setImmediate(r));

describe('wait room', () => {
  it('a write wakes the head of the line only; the next one wakes when the head found messages', async () => {
    const room = new WaitRoom();
    const { woken } = parkMany(room, 1000);
    expect(room.parked).toBe(1000);
    room.wake('q', ['p1']);
    await tick();
    expect(woken).toEqual([0]);
    expect(room.parked).toBe(999);
    room.wakeNext('q', 'g', null);
    await tick();
    expect(woken).toEqual([0, 1]);
    room.wakeAll();
    await tick();
    expect(woken).toHaveLength(1000);
    expect(room.parked).toBe(0);
  });

  it('says whether a line has pops parked, per group and partition filter', async () => {
    const room = new WaitRoom();
    expect(room.waiting('q', 'g', null)).toBe(false);
    parkMany(room, 2, 'q', 'g', null);
    expect([room.waiting('q', 'g', null), room.waiting('q', 'g', 'p1'), room.waiting('q', 'other', null)]).toEqual([true, false, false]);
    room.wake('q', ['p1']);
    await tick();
    expect(room.waiting('q', 'g', null)).toBe(true);
    room.wakeNext('q', 'g', null);
    await tick();
    expect(room.waiting('q', 'g', null)).toBe(false);
  });

  it('one line per consumer group and per pinned partition; a write wakes only lines it can feed', async () => {
    const room = new WaitRoom();
    const a = parkMany(room, 3, 'q', 'ga');
    const b = parkMany(room, 3, 'q', 'gb');
    const pinned = parkMany(room, 3, 'q', 'ga', 'p2');
    const other = parkMany(room, 3, 'other', 'ga');
    room.wake('q', ['p1']);
    await tick();
    expect([a.woken, b.woken, pinned.woken, other.woken]).toEqual([[0], [0], [], []]);
    room.wake('q', ['p2']);
    await tick();
    expect([a.woken, b.woken, pinned.woken, other.woken]).toEqual([[0, 1], [0, 1], [0], []]);
    // Unknown partitions (a remote broker's NOTIFY): every line's head of that queue.
    room.wake('q', null);
    await tick();
    expect([a.woken, b.woken, pinned.woken, other.woken]).toEqual([[0, 1, 2], [0, 1, 2], [0, 1], []]);
    room.wakeAll();
  });

  it('only the head of a line re-checks on the timer, once per interval', async () => {
    const room = new WaitRoom();
    const { woken } = parkMany(room, 50);
    await new Promise((r) => setTimeout(r, RECHECK_MS * 2 + 150));
    expect(woken).toEqual([0, 1]);
    room.wakeAll();
  });

  it('timeouts and waiters let out through their door leave the line; nothing stays parked', async () => {
    const room = new WaitRoom();
    const order: string[] = [];
    let leave: (() => void) | undefined;
    const t = room.park('q', 'g', null, 30).then(() => order.push('timeout'));
    const g = room.park('q', 'g', null, 60_000, (l) => (leave = l)).then(() => order.push('gone'));
    const h = room.park('q', 'g', null, 60_000).then(() => order.push('woken'));
    await t;
    leave!();
    await g;
    expect(room.parked).toBe(1);
    room.wake('q', ['x']);
    await h;
    expect(order).toEqual(['timeout', 'gone', 'woken']);
    expect(room.parked).toBe(0);
    // Leaving again, after the wait ended, changes nothing.
    leave!();
    expect(room.parked).toBe(0);
  });

  it('a wake that finds no one parked is told to the queries in flight of the lines it feeds', async () => {
    const room = new WaitRoom();
    const any = room.watch('q', 'g', null);
    const pinned = room.watch('q', 'g', 'p2');
    const otherGroup = room.watch('q', 'h', null);
    room.wake('q', ['p1']);
    expect([room.missedSince(any), room.missedSince(pinned), room.missedSince(otherGroup)]).toEqual([true, false, true]);
    // With a pop parked in the line, the wake is its: the query in flight is not told.
    const later = room.watch('q', 'g', 'p2');
    const { woken } = parkMany(room, 1, 'q', 'g', 'p2');
    room.wake('q', ['p2']);
    await tick();
    expect(woken).toEqual([0]);
    expect(room.missedSince(later)).toBe(false);
    // Shutdown and resumed pops tell every query in flight.
    room.wakeAll();
    expect(room.missedSince(later)).toBe(true);
    // A query knows whether a pop of its line was parked when it began.
    expect([any.waiting, later.waiting]).toEqual([false, false]);
    const { woken: parkedFirst } = parkMany(room, 1, 'q', 'g', null);
    const behind = room.watch('q', 'g', null);
    expect(behind.waiting).toBe(true);
    room.wakeAll();
    await tick();
    expect(parkedFirst).toEqual([0]);
    for (const w of [any, pinned, otherGroup, later, behind]) room.unwatch(w);
    // A line with neither waiters nor queries is dropped: a later wake keeps nothing.
    expect((room as any).queues.size).toBe(0);
  });

  it("an ack's wake reaches only its own group's lines that the partition feeds", async () => {
    const room = new WaitRoom();
    const ga = parkMany(room, 2, 'q', 'ga');
    const gaPinned = parkMany(room, 1, 'q', 'ga', 'p2');
    const gb = parkMany(room, 2, 'q', 'gb');
    room.wakeGroup('q', 'ga', ['p1']);
    await tick();
    expect([ga.woken, gaPinned.woken, gb.woken]).toEqual([[0], [], []]);
    // Not a write: the ack's wake leaves the partition wake counts alone.
    const stamp = room.stamp();
    room.wakeGroup('q', 'ga', ['p2']);
    await tick();
    expect([ga.woken, gaPinned.woken, gb.woken]).toEqual([[0, 1], [0], []]);
    expect(room.wokenSince(stamp, 'q', 'p2')).toBe(false);
    room.wakeAll();
  });

  it('an ack sees whether a partition it released was woken while it ran', () => {
    const room = new WaitRoom();
    const stamp = room.stamp();
    expect(room.wokenSince(stamp, 'q', 'p1')).toBe(false);
    room.wake('q', ['p1']);
    room.wake('other', ['p2']);
    expect(room.wokenSince(stamp, 'q', 'p1')).toBe(true);
    // Another partition may share p1's slot (one wake-up too many), but not
    // all 200 of these can: most answer no.
    const misses = Array.from({ length: 200 }, (_, i) => room.wokenSince(stamp, 'q', `x${i}`)).filter((x) => !x).length;
    expect(misses).toBeGreaterThan(190);
    // A wake naming no partition (a remote broker's NOTIFY) counts for every partition of its queue.
    const next = room.stamp();
    room.wake('q');
    expect(room.wokenSince(next, 'q', 'x7')).toBe(true);
    expect(room.wokenSince(next, 'other', 'p2')).toBe(false);
  });

  describe('re-check with a probe', () => {
    /** A probe that records what it was asked and answers `pending` (by queue name) and `paused`. */
    function probeOf(state: { pending: Set<string>; paused: boolean; fail?: boolean }) {
      const asked: LineRef[][] = [];
      const probe: LineProbe = async (lines) => {
        asked.push([...lines]);
        if (state.fail) throw new Error('no database');
        return { pending: lines.flatMap((l, i) => (state.pending.has(l.queue) ? [i] : [])), paused: state.paused };
      };
      return { asked, probe };
    }

    it('asks once about each line parked in since the last re-check, then only about a fixed share of the quiet ones', async () => {
      vi.useFakeTimers();
      try {
        const state = { pending: new Set<string>(), paused: false };
        const { asked, probe } = probeOf(state);
        const room = new WaitRoom(probe);
        const lines = 3 * SWEEP_LINES + 50;
        const parked = Array.from({ length: lines }, (_, i) => parkMany(room, 2, `q${i}`));
        await vi.advanceTimersByTimeAsync(RECHECK_MS);
        expect(asked.map((a) => a.length)).toEqual([lines]);
        // Nothing pending: no one woken, and from now on SWEEP_LINES lines a
        // re-check, least recently asked first, whatever the number parked.
        for (let i = 0; i < 4; i++) await vi.advanceTimersByTimeAsync(RECHECK_MS);
        expect(asked.slice(1).map((a) => a.length)).toEqual([SWEEP_LINES, SWEEP_LINES, SWEEP_LINES, SWEEP_LINES]);
        const swept = new Set(asked.slice(1, 4).flat().map((l) => l.queue));
        expect(swept.size).toBe(3 * SWEEP_LINES);
        expect(asked[4]!.slice(0, 50).every((l) => !swept.has(l.queue))).toBe(true);
        expect(room.parked).toBe(2 * lines);

        // A line with something pending: its head looks, and the line is asked about again next time.
        state.pending.add('q7');
        room.wake('q7', ['p']);
        await vi.advanceTimersByTimeAsync(0);
        expect(parked[7]!.woken).toEqual([0]);
        // Its head found nothing it could claim (say, leased) and parks again at the back.
        const again = parkMany(room, 1, 'q7');
        await vi.advanceTimersByTimeAsync(RECHECK_MS);
        expect([parked[7]!.woken, again.woken]).toEqual([[0, 1], []]);
        expect(asked.at(-1)!.some((l) => l.queue === 'q7')).toBe(true);
        await vi.advanceTimersByTimeAsync(RECHECK_MS);
        expect(again.woken).toEqual([0]);

        // Paused: every line's head answers.
        expect(room.parked).toBe(2 * lines - 2);
        state.paused = true;
        await vi.advanceTimersByTimeAsync(RECHECK_MS);
        expect(room.parked).toBe(lines - 1);
        room.wakeAll();
        await vi.advanceTimersByTimeAsync(0);
        expect(room.parked).toBe(0);
        // Nothing parked: no re-check, no statement.
        const before = asked.length;
        await vi.advanceTimersByTimeAsync(5 * RECHECK_MS);
        expect(asked.length).toBe(before);
      } finally {
        vi.useRealTimers();
      }
    });

    it('a probe that fails lets every line it asked about look, as the re-check did without one', async () => {
      vi.useFakeTimers();
      try {
        const { asked, probe } = probeOf({ pending: new Set(), paused: false, fail: true });
        const room = new WaitRoom(probe);
        const a = parkMany(room, 2, 'a');
        const b = parkMany(room, 1, 'b', 'g', 'p1');
        await vi.advanceTimersByTimeAsync(RECHECK_MS);
        expect(asked).toHaveLength(1);
        expect([a.woken, b.woken]).toEqual([[0], [0]]);
        room.wakeAll();
      } finally {
        vi.useRealTimers();
      }
    });
  });
});
