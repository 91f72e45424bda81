import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, type TestBroker } from '@queen-mq/testing';
import { collectUntil, cursorOf, push, sleep, stateRows, useStreamBroker } from '../test/helpers.js';
import { killAllWorkers, killHard, spawnWorker } from '../test/worker-process.js';

// A deploy the hard way (issue 33): version 1 of a query runs in its own
// process and is SIGKILLed mid-stream, with pushes still arriving and
// messages pending; version 2 (its map now adds a field the reducer ignores)
// starts in its place with `upgrade: 'keep-state'`. The hour window open at
// the kill must come out once, holding every message exactly once.

const env = useStreamBroker();
const { names } = env;
let b: TestBroker;
beforeAll(() => {
  ({ b } = env);
});
afterAll(() => {
  killAllWorkers();
});

interface Worker {
  child: ChildProcess;
  /** The first line it answered: `ready <uuid>`, `plan <json>` or `refused <json>`. */
  answer: string;
  /** Cycles it reported committing so far. */
  commits: () => number;
}

/** Starts test/upgrade-worker.ts from the workspace sources and waits for its first answer. */
function startWorker(vars: Record<string, string>): Promise<Worker> {
  const child = spawnWorker('upgrade-worker.ts', vars);
  let commits = 0;
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker gave no answer in 20 s: ${err}`)), 20000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      commits = out.match(/^commit /gm)?.length ?? 0;
      const answer = out.split('\n').find((line) => /^(ready|plan|refused) /.test(line));
      if (answer) {
        clearTimeout(timer);
        resolve({ child, answer, commits: () => commits });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited (${code}) without an answer: ${err}`));
    });
  });
}

/** Sale `i` (its amount `i + 1`), inside hour 10: the window that stays open across the deploy. */
const at = (i: number) => `2026-01-05T10:${String(i % 60).padStart(2, '0')}:${String(i % 59).padStart(2, '0')}.000Z`;
const sales = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => ({ ts: at(from + k), n: from + k + 1 }));

describe('deploying a new version over a killed runner', () => {
  it('version 1 SIGKILLed mid-stream, version 2 (map changed) started with keep-state: the open hour window is kept and emitted once with the exact count and sum', async () => {
    const { src, sink, queryId } = await names('upg-kill');
    const vars = { QUEEN_URL: b.url, SRC: src, SINK: sink, QUERY_ID: queryId };
    const total = 300;

    // Version 1 starts on 100 waiting messages; 100 more arrive in small batches while it runs and is killed.
    const [first] = await push(b, src, sales(0, 100));
    const partitionId = first!.partition_id;
    const v1 = await startWorker({ ...vars, VERSION: '1' });
    const queryUuid = v1.answer.split(' ')[1]!;
    let pushed = 100;
    const pushing = (async () => {
      for (; pushed < 200; pushed += 10) {
        await push(b, src, sales(pushed, pushed + 10));
        await sleep(20);
      }
    })();
    await eventually(async () => v1.commits() >= 3, 15000, 5);
    await killHard(v1.child);
    await pushing;

    // A cycle version 1 sent just before dying may still commit: let it land, then hold the partition's
    // commit lock so that version 2 cannot fold anything before its starting state has been looked at.
    await sleep(500);
    const held = await b.sql.connect();
    const lockArgs = [queryUuid, partitionId];
    await held.query(`select pg_advisory_lock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, lockArgs);
    try {
      const consumed = Number(await cursorOf(b, `streams.${queryId}`, src));
      expect(consumed).toBeGreaterThan(0);
      expect(consumed).toBeLessThan(200); // killed mid-stream: messages were still pending
      const openBefore = (await stateRows(b, queryUuid, partitionId)).filter((r) => r.key.startsWith('tumb:'));
      expect(openBefore).toHaveLength(1);
      // The open window holds exactly what version 1 committed: the first `consumed` sales.
      expect(openBefore[0]!.value.acc).toEqual({ count: consumed, sum: (consumed * (consumed + 1)) / 2 });

      const plan = JSON.parse((await startWorker({ ...vars, VERSION: '2', ACTION: 'plan' })).answer.slice('plan '.length));
      expect(plan.plan.verdict).toBe('keep-state');
      expect(plan.plan.stages.map((s: { name: string; change: string; state_action: string }) => [s.name, s.change, s.state_action])).toEqual([
        ['enrich', 'state-compatible', 'none'],
        ['per-hour', 'unchanged', 'keep'],
        ['reducer', 'unchanged', 'keep'],
        ['sink', 'unchanged', 'none'],
      ]);

      // Without consent the new version is refused, and nothing changes.
      const refused = JSON.parse((await startWorker({ ...vars, VERSION: '2' })).answer.slice('refused '.length));
      expect(refused).toMatchObject({ status: 409, code: 'CONFIG_HASH_MISMATCH' });
      expect(refused.message).toContain('config_hash mismatch');

      const v2 = await startWorker({ ...vars, VERSION: '2', UPGRADE: 'keep-state' });
      expect(v2.answer).toBe(`ready ${queryUuid}`);
      const kept = (await stateRows(b, queryUuid, partitionId)).filter((r) => r.key.startsWith('tumb:'));
      expect(kept).toEqual(openBefore); // same row, same version: neither reset nor rewritten
    } finally {
      await held.query(`select pg_advisory_unlock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, lockArgs);
      held.release();
    }

    // The rest of the hour, then a sale an hour later closes it (its own window stays open).
    await push(b, src, sales(200, total));
    await push(b, src, [{ ts: '2026-01-05T11:30:00.000Z', n: 1_000_000 }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 15000, 1000);
    expect(got.map((m) => m.data)).toEqual([{ count: total, sum: (total * (total + 1)) / 2 }]);
  });
});
