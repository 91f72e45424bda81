import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { TopCounter } from './top-counter.js';

/** The samples of one scrape, `queue=value` in printed order. */
async function shown(registry: Registry): Promise<string[]> {
  const text = await registry.metrics();
  return [...text.matchAll(/^t_total\{queue="([^"]+)"\} (\d+)$/gm)].map((m) => `${m[1]}=${m[2]}`);
}

describe('TopCounter', () => {
  it('shows the N largest label sets, each with its whole count, and counts the rest', async () => {
    const registry = new Registry();
    const c = new TopCounter({ name: 't_total', help: 'test', labelNames: ['queue'], registers: [registry], topN: 2 });
    c.inc({ queue: 'a' }, 5);
    c.inc({ queue: 'b' }, 3);
    c.inc({ queue: 'c' });
    expect(await shown(registry)).toEqual(['a=5', 'b=3']);
    // c passes both: it enters with its whole count since the start, b leaves the scrape.
    c.inc({ queue: 'c' }, 10);
    expect(await shown(registry)).toEqual(['c=11', 'a=5']);
    expect(c.value({ queue: 'b' })).toBe(3);
    expect(c.value({ queue: 'never' })).toBe(0);
  });

  it('N = 0 shows no label set; 1,000 queues still show N', async () => {
    const none = new Registry();
    const hidden = new TopCounter({ name: 't_total', help: 'test', labelNames: ['queue'], registers: [none], topN: 0 });
    hidden.inc({ queue: 'a' });
    expect(await shown(none)).toEqual([]);
    const registry = new Registry();
    const c = new TopCounter({ name: 't_total', help: 'test', labelNames: ['queue'], registers: [registry], topN: 100 });
    for (let i = 0; i < 1000; i++) c.inc({ queue: `q${i}` }, i + 1);
    const samples = await shown(registry);
    expect(samples).toHaveLength(100);
    expect(samples[0]).toBe('q999=1000');
  });
});
