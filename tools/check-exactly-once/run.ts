// One seed, end to end: a fresh database and broker, the fault proxy, the
// runner child; the schedule played against them (pushes, faults, watermark
// waits); the wait until every window has closed; then everything read back
// from the broker: the stored source messages, the sink, the late queue, the
// DLQ and the query's state.
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshDatabase, startTestBroker, type TestBroker } from '@queen-mq/testing';
import { rngOf } from './prng.js';
import { startFaultProxy } from './proxy.js';
import { drawSchedule, type Schedule, type Step } from './schedule.js';
import { drawVariant, type Variant, type VariantFilter } from './variant.js';
import type { StoredMessage } from './model.js';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, '..', '..');

export const SOURCE = 'eo.src';
export const SINK = 'eo.sink';
export const LATE = 'eo.late';
/** A join's right queue (the source is its left one). */
export const RIGHT = 'eo.right';
const LEASE_S = 2;

export interface QueueMessage {
  partition: string;
  partitionId: string;
  offset: string;
  transactionId: string;
  createdAt: string;
  data: any;
}

export interface Observed {
  source: StoredMessage[];
  /** A join's right queue, stored. */
  right: StoredMessage[];
  /** A join: per partition name, the records its shard holds (`left:<id>`, `right:<id>`). */
  joinHeld: Map<string, string[]>;
  sink: QueueMessage[];
  late: QueueMessage[];
  dlq: { partition: string; offset: string; errorMessage: string | null }[];
  /** State rows per source partition name. */
  state: Map<string, { key: string; value: any; version: number }[]>;
  /** Processing time: when each push meant to straddle a boundary was sent and answered (epoch ms). */
  straddlers: { partition: string; items: number; sentMs: number; answeredMs: number }[];
  /** What the run did: faults applied, runner restarts, errors the run itself met. */
  notes: string[];
  /** The run could not finish its schedule (a watermark never seen, the broker not answering). */
  runError?: string;
}

export interface SeedRun {
  seed: number;
  variant: Variant;
  schedule: Schedule;
  observed: Observed;
  queryId: string;
  elapsedMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class Runner {
  child?: ChildProcess;
  queryUuid = '';
  starts = 0;
  stderr = '';
  constructor(private env: Record<string, string>) {}

  async start(): Promise<void> {
    this.starts += 1;
    // node with tsx as a loader (not the tsx CLI, which forks a second process a SIGKILL would leave behind)
    const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'runner-child.ts')], {
      cwd: repoRoot,
      env: { ...process.env, ...this.env, TSX_TSCONFIG_PATH: join(here, 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stderr!.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-4000);
      if (process.env.EO_DEBUG) process.stderr.write(`[runner] ${d}`);
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`runner not ready in 90 s: ${this.stderr}`)), 90000);
      child.stdout!.on('data', (d: Buffer) => {
        const m = /ready (\S+)/.exec(d.toString());
        if (m) {
          this.queryUuid = m[1]!;
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`runner exited (${code}) before ready: ${this.stderr}`));
      });
    });
  }

  kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  }
}

/** Reads a whole queue with a fresh consumer group (autoAck), in partition then offset order. */
async function readQueue(b: TestBroker, queue: string): Promise<QueueMessage[]> {
  const group = `check-${Math.random().toString(16).slice(2)}`;
  const out: QueueMessage[] = [];
  for (let empty = 0; empty < 2; ) {
    const res = await b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}?batch=1000&wait=true&timeout=100&autoAck=true&partitions=50&consumerGroup=${group}`);
    if (res.status !== 200) {
      empty += 1;
      continue;
    }
    empty = 0;
    out.push(...res.body.messages);
  }
  return out.sort((a, b) => a.partition.localeCompare(b.partition) || (BigInt(a.offset) < BigInt(b.offset) ? -1 : 1));
}

export async function runSeed(seed: number, filter: VariantFilter, adminUrl: string): Promise<SeedRun> {
  const began = Date.now();
  const rng = rngOf(seed);
  const variant = drawVariant(rng, filter);
  const schedule = drawSchedule(rng, variant, seed);
  const faultRandom = rngOf(seed ^ 0x5bd1e995).next; // its own stream: the schedule does not depend on how often faults draw
  const queryId = `eo-${seed}`;
  const notes: string[] = [];
  const databaseUrl = await freshDatabase(adminUrl);
  let b = await startTestBroker({ databaseUrl });
  const proxy = await startFaultProxy(b.url, faultRandom);
  const runner = new Runner({ QUEEN_URL: proxy.url, SRC: SOURCE, SINK, LATE, RIGHT, QUERY_ID: queryId, VARIANT: JSON.stringify(variant) });
  const partitionIds = new Map<string, string>();
  const pushTimes: Observed['straddlers'] = [];
  let runError: string | undefined;
  // faults one after the other: a second kill must not hit a runner the first one is still starting
  let faults: Promise<void> = Promise.resolve();
  try {
    const configured = await b.http('POST', '/api/v1/configure', { queue: SOURCE, options: { leaseTime: LEASE_S, retryLimit: 1 } });
    if (configured.status !== 200) throw new Error(`configure answered ${configured.status}`);
    if (variant.kind === 'join') {
      const right = await b.http('POST', '/api/v1/configure', { queue: RIGHT, options: { leaseTime: LEASE_S, retryLimit: 1 } });
      if (right.status !== 200) throw new Error(`configure answered ${right.status}`);
    }
    await runner.start();

    const push = async (step: Extract<Step, { type: 'push' }>) => {
      const body = { items: step.items.map((payload) => ({ queue: step.queue === 'right' ? RIGHT : SOURCE, partition: step.partition, payload })) };
      for (let attempt = 0; ; attempt++) {
        const sentAt = Date.now();
        const res = await b.http('POST', '/api/v1/push', body).catch((err: Error) => ({ status: 0, body: err.message }));
        if (res.status === 201) {
          if (step.queue !== 'right') partitionIds.set(step.partition, res.body[0].partition_id);
          if (step.leadFactor) pushTimes.push({ partition: step.partition, items: step.items.length, sentMs: sentAt, answeredMs: Date.now() });
          return;
        }
        // the broker may be restarting: a push that got no answer is retried (a broker-side duplicate would show in the model's input, which is what was stored)
        if (attempt > 100) throw new Error(`push answered ${res.status}: ${JSON.stringify(res.body).slice(0, 200)}`);
        await sleep(100);
      }
    };
    let restarting: Promise<void> | undefined;
    const fault = (step: Extract<Step, { type: 'fault' }>) => (faults = faults.then(() => applyFault(step)));
    const applyFault = async (step: Extract<Step, { type: 'fault' }>) => {
      notes.push(`${step.fault}${step.atMs !== undefined ? ` at +${step.atMs} ms` : ''}`);
      switch (step.fault) {
        case 'kill':
          await runner.kill();
          await runner.start();
          return;
        case 'lost':
          proxy.lostRate = 0.1 + faultRandom() * 0.3;
          return;
        case 'stall':
          proxy.stall(1, LEASE_S * 1000 + 500);
          return;
        case 'restart':
          restarting ??= (async () => {
            proxy.target = undefined;
            await b.stop();
            b = await startTestBroker({ databaseUrl });
            proxy.target = b.url;
          })();
          return restarting;
      }
    };
    const watermarkOf = async (partition: string): Promise<number | undefined> => {
      const id = partitionIds.get(partition);
      if (!id) return undefined;
      const res = await b.http('POST', '/streams/v1/state/get', { query_id: runner.queryUuid, partition_id: id, keys: ['__wm__'] });
      return res.status === 200 ? res.body.rows[0]?.value?.eventTimeMs : undefined;
    };

    if (variant.time === 'event' && variant.kind !== 'gate') {
      for (const step of schedule.steps) {
        if (step.type === 'push') await push(step);
        else if (step.type === 'fault') await fault(step);
        else {
          const end = Date.now() + 30000;
          while (((await watermarkOf(step.partition)) ?? -Infinity) < step.atLeast) {
            if (Date.now() > end) throw new Error(`watermark of ${step.partition} not at ${step.atLeast} within 30 s (at ${await watermarkOf(step.partition)})`);
            await sleep(20);
          }
        }
      }
    } else {
      // wall-clock schedule, aligned to a whole second (window boundaries are at whole seconds)
      const leadPerItem = await stampLeadPerItem(b);
      notes.push(`push lead ${(leadPerItem * 1000).toFixed(0)} ms per 1,000 items`);
      const start = Math.ceil((Date.now() + 400) / 1000) * 1000;
      await Promise.all(
        schedule.steps.map(async (step) => {
          const lead = step.type === 'push' && step.leadFactor ? step.leadFactor * leadPerItem * step.items.length : 0;
          await sleep(Math.max(0, start + (step.atMs ?? 0) - lead - Date.now()));
          if (step.type === 'push') await push(step);
          else if (step.type === 'fault') await fault(step);
        }),
      );
    }
    await faults;
    proxy.lostRate = 0;
    proxy.stall(0, 0);
    await restarting;
    if (variant.kind === 'join') await settleJoin(variant, () => b, `streams.${queryId}`, runner);
    else await settle(variant, schedule, () => b, runner, partitionIds, watermarkOf);
  } catch (err) {
    runError = (err as Error).message;
  }
  await faults.catch((err: Error) => (runError ??= `fault: ${err.message}`)); // a restart under way ends before the broker is read
  await runner.kill();
  notes.push(`runner started ${runner.starts}x; proxy lost ${proxy.counts.lost} answers, stalled ${proxy.counts.stalled}, reset ${proxy.counts.reset}`);
  try {
    const stored = await readQueue(b, SOURCE);
    const source = stored.map((m) => ({ partition: m.partition, offset: m.offset, createdAtMs: Date.parse(m.createdAt), data: m.data }));
    for (const m of stored) partitionIds.set(m.partition, m.partitionId);
    if (pushTimes.length) notes.push(straddleNote(pushTimes, source));
    const right =
      variant.kind === 'join' ? (await readQueue(b, RIGHT)).map((m) => ({ partition: m.partition, offset: m.offset, createdAtMs: Date.parse(m.createdAt), data: m.data })) : [];
    const joinHeld = new Map<string, string[]>();
    if (variant.kind === 'join' && runner.queryUuid) {
      // The join's shards are named by no partition: their `__join__` row carries the partition's name.
      const { rows } = await b.sql.query('select partition_id::text as shard, key, value from queen_streams.state where query_id = $1', [runner.queryUuid]);
      const names = new Map(rows.filter((r) => r.key === '__join__').map((r) => [r.shard, r.value.partition as string]));
      for (const r of rows) {
        const m = /^join\u001f(left|right)\u001f/.exec(r.key);
        if (!m) continue;
        const name = names.get(r.shard) ?? `?${r.shard}`;
        joinHeld.set(name, [...(joinHeld.get(name) ?? []), ...r.value.records.map((x: any) => `${m[1]}:${x.value.id}`)]);
      }
    }
    const sink = await readQueue(b, SINK);
    const late = await readQueue(b, LATE);
    const dlqRes = await b.http('GET', `/api/v1/dlq?queue=${SOURCE}&consumerGroup=${encodeURIComponent(`streams.${queryId}`)}&limit=1000`);
    const dlq = dlqRes.status === 200 ? dlqRes.body.messages : [];
    const state = new Map<string, { key: string; value: any; version: number }[]>();
    for (const [partition, id] of partitionIds) {
      if (!runner.queryUuid) continue;
      const res = await b.http('POST', '/streams/v1/state/get', { query_id: runner.queryUuid, partition_id: id });
      state.set(partition, res.status === 200 ? res.body.rows : []);
    }
    return { seed, variant, schedule, queryId, elapsedMs: Date.now() - began, observed: { source, right, joinHeld, sink, late, dlq, state, notes, runError, straddlers: pushTimes } };
  } finally {
    await proxy.close();
    await b.stop();
  }
}

/**
 * How many of the pushes meant to straddle a boundary did: their items
 * stamped before a whole second, their answer (the commit) after it — the
 * idle flush's race was set up that often (with the stamp-to-boundary and
 * boundary-to-answer ms of each, for tuning).
 */
function straddleNote(pushes: Observed['straddlers'], source: StoredMessage[]): string {
  const detail: string[] = [];
  let straddled = 0;
  for (const p of pushes) {
    const stamps = source.filter((m) => m.partition === p.partition && m.createdAtMs >= p.sentMs - 5 && m.createdAtMs <= p.answeredMs + 5).map((m) => m.createdAtMs);
    const counts = new Map<number, number>();
    for (const t of stamps) counts.set(t, (counts.get(t) ?? 0) + 1);
    const stamp = [...counts].find(([, n]) => n === p.items)?.[0];
    if (stamp === undefined) continue;
    const boundary = Math.ceil(stamp / 1000) * 1000;
    if (p.answeredMs > boundary) straddled += 1;
    detail.push(`${stamp - boundary}/+${p.answeredMs - boundary}`);
  }
  return `straddling pushes ${straddled} of ${pushes.length} (stamp/answer ms from the boundary: ${detail.join(' ')})`;
}

/**
 * How long after it is sent a push's items are stamped, per item (ms): the
 * broker reads and validates the whole body first. Measured once per seed on
 * a scratch queue with 2,000 items, so the pushes meant to straddle a window
 * boundary are sent early enough on this machine under its current load.
 */
async function stampLeadPerItem(b: TestBroker): Promise<number> {
  const size = 2000;
  await b.http('POST', '/api/v1/push', { items: [{ queue: 'eo.calibrate', payload: { warm: true } }] });
  const sent = Date.now();
  const res = await b.http('POST', '/api/v1/push', { items: Array.from({ length: size }, (_, i) => ({ queue: 'eo.calibrate', payload: { i } })) });
  if (res.status !== 201) return 0.06;
  const pop = await b.http('GET', '/api/v1/pop/queue/eo.calibrate?batch=2&autoAck=true');
  const stamped = Date.parse(pop.body?.messages?.[1]?.createdAt);
  return Number.isFinite(stamped) ? Math.max(0, stamped - sent) / size : 0.06;
}

/**
 * Waits until the outcome can be compared: every window that will close has
 * closed, and the sink has stopped growing for a while (a duplicate or a
 * late re-emit would still show up).
 *   - processing time: until the broker's clock (≈ ours, same host) is past
 *     every window's end + grace, then until no window row is left;
 *   - event time: until every partition's watermark is at its closer;
 *   - gate: until the sink has not grown for two leases (a denied message
 *     comes back after one).
 */
async function settle(variant: Variant, schedule: Schedule, broker: () => TestBroker, runner: Runner, partitionIds: Map<string, string>, watermarkOf: (p: string) => Promise<number | undefined>) {
  const deadline = Date.now() + 60000;
  const stateRows = async () => {
    let rows = 0;
    for (const id of partitionIds.values()) {
      const res = await broker().http('POST', '/streams/v1/state/get', { query_id: runner.queryUuid, partition_id: id });
      if (res.status === 200) rows += res.body.rows.filter((r: any) => r.key !== '__wm__').length;
    }
    return rows;
  };
  if (variant.kind === 'gate') {
    // nothing to wait for but the denied tails' leases
  } else if (variant.time === 'processing') {
    const longest = variant.kind === 'sliding' ? variant.sliding!.sizeMs : variant.kind === 'cron-expr' ? 6000 : 1000;
    await sleep(longest + variant.graceS * 1000 + variant.idleFlushMs + 500);
    while ((await stateRows()) > 0 && Date.now() < deadline) await sleep(200);
  } else {
    const closers = new Map<string, number>();
    for (const s of schedule.steps) if (s.type === 'push' && s.items[0]?.k === 'closer') closers.set(s.partition, s.items[0].ts! - variant.allowedLatenessS * 1000);
    for (const [partition, wm] of closers) while (((await watermarkOf(partition)) ?? -Infinity) < wm && Date.now() < deadline) await sleep(100);
  }
  // quiet period: the sink and the late queue stop growing
  const quietMs = variant.kind === 'gate' ? LEASE_S * 2000 + 500 : 1500;
  let last = -1;
  let quietSince = Date.now();
  while (Date.now() < deadline) {
    const depth = await queueDepth(broker(), SINK) + (await queueDepth(broker(), LATE));
    if (depth !== last) {
      last = depth;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= quietMs) return;
    await sleep(250);
  }
}

/**
 * A join's wait: until the query's group has consumed both queues (no lag
 * on any partition); in processing time, until the broker's clock (≈ ours,
 * same host) is past every record's bound and the idle flush has let every
 * held record go; then until the sink has not grown for a while.
 */
async function settleJoin(variant: Variant, broker: () => TestBroker, group: string, runner: Runner) {
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    const res = await broker().http('GET', `/api/v1/consumer-groups/${encodeURIComponent(group)}`);
    const parts = res.status === 200 ? (res.body.partitions as { queue: string; lag: number }[]).filter((p) => p.queue === SOURCE || p.queue === RIGHT) : [];
    if (parts.length > 0 && parts.every((p) => p.lag === 0)) break;
    await sleep(200);
  }
  if (variant.time === 'processing') {
    await sleep(variant.withinMs! + variant.graceS * 1000 + variant.idleFlushMs + 500);
    const heldRecords = async () =>
      runner.queryUuid
        ? ((await broker().sql.query(`select count(*)::int as n from queen_streams.state where query_id = $1 and key like 'join%'`, [runner.queryUuid])).rows[0].n as number)
        : 0;
    while ((await heldRecords()) > 0 && Date.now() < deadline) await sleep(200);
  }
  let last = -1;
  let quietSince = Date.now();
  while (Date.now() < deadline) {
    const depth = await queueDepth(broker(), SINK);
    if (depth !== last) {
      last = depth;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= 1500) return;
    await sleep(250);
  }
}

async function queueDepth(b: TestBroker, queue: string): Promise<number> {
  return (await readQueue(b, queue)).length;
}
