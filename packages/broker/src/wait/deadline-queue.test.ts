import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeadlineQueue, type Timed } from './deadline-queue.js';

// The one timer behind every parked pop's timeout (wait-room.ts): each item
// expires once, not before its deadline and about when it falls due, in
// deadline order; an item taken out never expires. Checked against a plain
// list on seeded random schedules of adds, removes and time passing.

interface Item extends Timed {
  id: number;
}

/** mulberry32: a small seeded generator, so a failing schedule can be run again. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('deadline queue', () => {
  for (const seed of [1, 2, 3, 42, 2024]) {
    it(`seed ${seed}: items expire once, on time and in deadline order; removed ones never`, async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
      const rnd = random(seed);
      const expired: { id: number; at: number; deadline: number }[] = [];
      const queue = new DeadlineQueue<Item>((item) => expired.push({ id: item.id, at: performance.now(), deadline: item.deadline }));
      const live = new Map<number, Item>();
      const removed = new Set<number>();
      let next = 0;
      for (let step = 0; step < 400; step++) {
        const r = rnd();
        if (r < 0.5) {
          const item: Item = { id: next++, deadline: performance.now() + Math.floor(rnd() * 500), slot: -1 };
          queue.add(item);
          live.set(item.id, item);
        } else if (r < 0.7 && live.size) {
          const ids = [...live.keys()];
          const id = ids[Math.floor(rnd() * ids.length)]!;
          queue.remove(live.get(id)!);
          queue.remove(live.get(id)!); // twice: the second changes nothing
          live.delete(id);
          removed.add(id);
        } else {
          await vi.advanceTimersByTimeAsync(Math.floor(rnd() * 50));
          for (const e of expired) live.delete(e.id);
        }
        expect(queue.size).toBe(live.size);
      }
      await vi.advanceTimersByTimeAsync(1000);
      const ids = expired.map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.filter((id) => removed.has(id))).toEqual([]);
      expect(ids.length + removed.size).toBe(next);
      for (const e of expired) {
        expect(e.at).toBeGreaterThanOrEqual(e.deadline);
        expect(e.at - e.deadline).toBeLessThanOrEqual(2);
      }
      for (let i = 1; i < expired.length; i++) expect(expired[i]!.deadline).toBeGreaterThanOrEqual(expired[i - 1]!.deadline);
      expect(queue.size).toBe(0);
    });
  }

  it('an item added from an expiry, already due, expires in the same firing; the timer is gone once the queue is empty', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const order: string[] = [];
    const queue = new DeadlineQueue<Item & { name: string }>((item) => {
      order.push(item.name);
      if (item.name === 'a') queue.add({ id: 2, name: 'c', deadline: performance.now(), slot: -1 });
    });
    queue.add({ id: 0, name: 'a', deadline: performance.now() + 10, slot: -1 });
    queue.add({ id: 1, name: 'b', deadline: performance.now() + 20, slot: -1 });
    await vi.advanceTimersByTimeAsync(10);
    expect(order).toEqual(['a', 'c']);
    await vi.advanceTimersByTimeAsync(10);
    expect(order).toEqual(['a', 'c', 'b']);
    expect(vi.getTimerCount()).toBe(0);
  });
});
