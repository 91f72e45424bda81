import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen } from '@queen-mq/client';
import '@queen-mq/kv';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { brokerComposition } from './index.js';

// The composition a deployment runs: a broker started from it serves the KV
// (routes, schema from the KV's own migration, the `kv` maintenance task).

let b: TestBroker;
let queen: Queen;
beforeAll(async () => {
  b = await startTestBroker({ ...brokerComposition() });
  queen = new Queen({ url: b.url, retries: 0 });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

describe('brokerComposition', () => {
  it('lists the KV plugin with its migrations (owner kv) and the console', () => {
    const c = brokerComposition();
    expect(c.plugins).toHaveLength(2);
    expect(c.migrations.map((m) => m.owner)).toEqual(['kv']);
    expect(c.services).toEqual([]);
  });

  it('a broker started from it serves the KV and runs its maintenance task', async () => {
    const ns = uniqueName('composed');
    await queen.kv.set(ns, 'k', 'v');
    expect(await queen.kv.get(ns, 'k')).toMatchObject({ value: 'v' });
    const run = await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['kv'] });
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({ kv: { expiredPurged: expect.any(Number) } });
  });

  it('a broker started from it serves the console page and its script', async () => {
    const page = await fetch(`${b.url}/console`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('/console/assets/console.js');
    const script = await fetch(`${b.url}/console/assets/console.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
  });
});
