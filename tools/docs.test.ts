import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokerComposition } from '@queen-mq/broker-composition';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';

// The newcomer's documents stay true to the code: docs/operations.md names
// every environment variable the broker reads and every metric a deployed
// broker serves; the root README keeps its two commands up front and links
// only to files in this repository.

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const operations = readFileSync(join(root, 'docs/operations.md'), 'utf8');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** Non-test TypeScript sources of a package. */
function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => readFileSync(join(root, dir, f), 'utf8'));
}

describe('docs/operations.md', () => {
  it('lists every environment variable the broker and the deployable read', () => {
    const names = new Set<string>();
    for (const text of [...sources('packages/broker/src'), ...sources('packages/broker-composition/src'), ...sources('apps/broker/src')]) {
      for (const m of text.matchAll(/env(?:\.|\[')([A-Z][A-Z0-9_]+)|int\(env, '([A-Z][A-Z0-9_]+)'|bool\(env, '([A-Z][A-Z0-9_]+)'/g)) names.add(m[1] ?? m[2] ?? m[3]!);
    }
    expect(names.size).toBeGreaterThan(30);
    expect(names).toContain('QUEEN_SHUTDOWN_TIMEOUT_MS');
    const missing = [...names].filter((n) => !operations.includes(`\`${n}\``) && !new RegExp(`\\b${n}\\b`).test(operations));
    expect(missing, 'document these in docs/operations.md#settings').toEqual([]);
  });

  describe('metrics', () => {
    let b: TestBroker;
    beforeAll(async () => {
      b = await startTestBroker(brokerComposition());
    });
    afterAll(async () => b?.stop());

    it('lists every metric family a deployed broker serves on /metrics', async () => {
      const res = await b.http('GET', '/metrics');
      expect(res.status).toBe(200);
      const families = [...new Set([...String(res.body).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!))];
      expect(families).toContain('queen_http_requests_total');
      const ours = families.filter((f) => !f.startsWith('process_') && !f.startsWith('nodejs_'));
      const missing = ours.filter((f) => !operations.includes(`\`${f}\``));
      expect(missing, 'document these in docs/operations.md#metrics').toEqual([]);
      expect(operations).toContain('`process_*`, `nodejs_*`');
    });
  });
});

describe('README.md', () => {
  it('opens with the two commands, before anything else runs', () => {
    const firstBlock = readme.slice(0, readme.indexOf('## '));
    expect(firstBlock).toContain('npm ci && npm start');
    expect(firstBlock).toContain('npm ci && npm test');
  });

  it('walks from clone to a pushed message, a window and queen tail showing it', () => {
    const walk = readme.slice(readme.indexOf('## Five minutes'), readme.indexOf('## A streaming query in ten lines'));
    for (const step of ['npm ci && npm start', 'node apps/orders-per-minute/dist/main.js', 'npx queen tail orders.per_minute', "npx queen push orders '{\"amount\":10}'", '{"sum":42,"count":2}']) {
      expect(walk).toContain(step);
    }
    // the worker it runs and the bin it names exist as the README says
    const pkg = JSON.parse(readFileSync(join(root, 'apps/orders-per-minute/package.json'), 'utf8'));
    expect(pkg.bin['orders-per-minute']).toBe('./dist/main.js');
  });

  it('links only to files in this repository, and they exist', () => {
    const links = [...readme.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)].map((m) => m[1]!).filter((l) => !/^[a-z]+:/.test(l));
    expect(links.length).toBeGreaterThan(10);
    for (const link of links) {
      expect(link, 'outside the repository').not.toMatch(/^\.\.\//);
      expect(existsSync(join(root, link)), link).toBe(true);
    }
    expect(readme).toContain('(packages/core/README.md#writing-a-window-plugin)');
    expect(readFileSync(join(root, 'packages/core/README.md'), 'utf8')).toMatch(/^## Writing a window plugin$/m);
    expect(readme).toContain('(docs/operations.md)');
  });
});
