import { randomBytes } from 'node:crypto';
import { isBookkeepingKey, joinShardId, stepQuery, type CompiledQuery, type ErrorInfo, type RunMetrics, type SteppedRun } from '@queen-mq/core';
import { startTestBroker, type TestBroker } from './harness.js';

/** A message the chain pushed to its sink queue. */
export interface Emit<T = any> {
  data: T;
  /** Sink partition name. */
  partition: string;
  /** The deterministic sink transactionId (PROTOCOL §7.6). */
  transactionId: string;
  /** When the sink push committed, on the virtual clock (ISO). */
  createdAt: string;
}

/** One stream state row (window accumulators, watermark, gate state). */
export interface StateRow {
  /** Source partition name. */
  partition: string;
  partitionId: string;
  key: string;
  value: any;
  version: number;
}

/** A source message the chain dead-lettered (a user function kept throwing past retryLimit). */
export interface DeadLetter {
  data: unknown;
  partition: string;
  offset: string;
  transactionId: string;
  errorMessage: string | null;
  retryCount: number;
}

/** Options of {@link testStream}. */
export interface TestStreamOptions {
  /**
   * A broker started with `virtualClock` to run on (it stays up after
   * `stop()`); default: a broker of the driver's own on a fresh database.
   */
  broker?: TestBroker;
  /** Virtual start time of the driver's own broker (epoch ms, Date or ISO). Default `2026-01-05T10:00:00.000Z`. */
  startAt?: number | string | Date;
  /** Query name. Default a unique one. */
  queryId?: string;
  /** Options of the source queue (POST /api/v1/configure), e.g. `{ leaseTime: 30, retryLimit: 2 }`. */
  source?: Record<string, unknown>;
  /** Messages per pop. Default 100. */
  batchSize?: number;
  /** Partitions per pop. Default 10. */
  maxPartitions?: number;
}

/** What {@link TestStream.push} takes: payloads, or items with a partition. */
export interface PushOptions {
  /** Source partition. Default `Default`. */
  partition?: string;
}

/** A chain under test, driven by hand on a virtual clock. */
export interface TestStream {
  readonly broker: TestBroker;
  /** The query's name and the server's UUID of it. */
  readonly queryId: string;
  readonly queryUuid: string;
  /** The virtual time, epoch ms. */
  now(): number;
  /**
   * Pushes `payloads` to the source at the current virtual time, then runs
   * the real cycles until nothing is left to pop (a gate-denied tail stays
   * leased until the clock passes its lease). Answers the emits this produced.
   */
  push(payloads: readonly unknown[], options?: PushOptions): Promise<Emit[]>;
  /**
   * Moves the virtual clock forward by `ms`, runs what became poppable
   * (leases that expired), then fires one idle flush at the new time — what
   * the idleFlushMs timer does at its next tick. Answers the emits.
   */
  advance(ms: number): Promise<Emit[]>;
  /** {@link advance} to an instant (epoch ms, Date or ISO string). */
  advanceTo(at: number | string | Date): Promise<Emit[]>;
  /** One idle-flush pass now (nothing for a chain without one: idleFlushMs 0, or no window). Answers the emits. */
  flush(): Promise<Emit[]>;
  /** Every emit so far, in order. */
  emits(): Emit[];
  /**
   * The query's state on every source partition, by partition then key: open
   * windows, gate rows, a join's held records. The runner's bookkeeping rows
   * (the watermark `__wm__`, a window's close horizon `<tag>␟__closed__`, a
   * join's `__join__`) only with `{ bookkeeping: true }`. A join's rows are
   * under its shard per partition name (`partitionId` is the shard's id).
   */
  state(options?: { bookkeeping?: boolean }): Promise<StateRow[]>;
  /** The source messages the query dead-lettered. */
  deadLetters(): Promise<DeadLetter[]>;
  /**
   * Window emits the query dead-lettered so far (a post-window operator or
   * the sink's mapping threw on a closed window): the records of its
   * dead-letter queue, `{queryId, partition, partitionId, key, window: {start, end}, stage, error, value}`.
   */
  deadEmits(): Promise<Record<string, any>[]>;
  /** Failures the runner reported (it keeps going after each, as in production). */
  readonly errors: { error: Error; info: ErrorInfo }[];
  metrics(): RunMetrics;
  /** Stops the query, and the broker if the driver started it. */
  stop(): Promise<void>;
}

/** A chain as the builders make it: `Stream.from(…)…to(…)` of queen-mq or @queen-mq/core. */
export interface CompilableChain {
  compile(): CompiledQuery;
}

/** Steps per call before the driver gives up (a chain that never settles, e.g. a poison loop without retryLimit). */
const MAX_STEPS = 10_000;

/**
 * Drives a chain like Kafka Streams' TopologyTestDriver, with none of the
 * engine simulated: the runner's own cycle code (core's stepQuery: the pop,
 * the operators, the window fold, the gate, the idle flush, the commit) runs
 * against a real broker and PostgreSQL whose clock is virtual. Queue handles
 * in the chain are used by name; the driver supplies the broker URL.
 */
export async function testStream(chain: CompilableChain, options: TestStreamOptions = {}): Promise<TestStream> {
  const plan = chain.compile();
  const own = options.broker ? undefined : await startTestBroker({ virtualClock: options.startAt ?? '2026-01-05T10:00:00.000Z' });
  const broker = options.broker ?? own!;
  const clock = broker.clock;
  if (!clock) {
    await own?.stop();
    throw new Error('testStream: the broker must be started with startTestBroker({ virtualClock })');
  }
  const queryId = options.queryId ?? `test-${randomBytes(4).toString('hex')}`;
  const errors: { error: Error; info: ErrorInfo }[] = [];
  let run: SteppedRun;
  try {
    if (options.source) {
      const res = await broker.http('POST', '/api/v1/configure', { queue: plan.sourceQueue, options: options.source });
      if (res.status !== 200) throw new Error(`testStream: configuring ${plan.sourceQueue} failed (${res.status}): ${JSON.stringify(res.body)}`);
    }
    run = await stepQuery(plan, {
      queryId,
      url: broker.url,
      batchSize: options.batchSize ?? 100,
      maxPartitions: options.maxPartitions ?? 10,
      // The runner's own clock is the virtual one: the broker's samples (createdAt) then agree with it.
      clock: () => clock.now(),
      onError: (error, info) => errors.push({ error, info }),
    });
  } catch (err) {
    await own?.stop();
    throw err;
  }

  const all: Emit[] = [];
  const sinkGroup = `test-stream-${randomBytes(4).toString('hex')}`;

  /** Everything new on the sink queue, read by the driver's own consumer group. */
  const deadEmits: Record<string, any>[] = [];
  const readDeadEmits = async () => {
    for (;;) {
      const res = await broker.http('GET', `/api/v1/pop/queue/${encodeURIComponent(run.deadLetterQueue)}?batch=1000&partitions=100&autoAck=true&consumerGroup=${sinkGroup}`);
      if (res.status === 204) return [...deadEmits];
      if (res.status !== 200) throw new Error(`testStream: reading ${run.deadLetterQueue} failed (${res.status}): ${JSON.stringify(res.body)}`);
      for (const m of res.body.messages) deadEmits.push(m.data);
    }
  };

  const readSink = async (): Promise<Emit[]> => {
    if (!plan.sinkQueue) return [];
    const got: Emit[] = [];
    for (;;) {
      const res = await broker.http('GET', `/api/v1/pop/queue/${encodeURIComponent(plan.sinkQueue)}?batch=1000&partitions=100&autoAck=true&consumerGroup=${sinkGroup}`);
      if (res.status === 204) break;
      if (res.status !== 200) throw new Error(`testStream: reading the sink ${plan.sinkQueue} failed (${res.status}): ${JSON.stringify(res.body)}`);
      for (const m of res.body.messages) got.push({ data: m.data, partition: m.partition, transactionId: m.transactionId, createdAt: new Date(m.createdAt).toISOString() });
    }
    all.push(...got);
    return got;
  };

  /** Runs cycles until a pop finds nothing. */
  const settle = async () => {
    for (let i = 0; ; i++) {
      if (i >= MAX_STEPS) throw new Error(`testStream: the chain did not settle in ${MAX_STEPS} pops`);
      if ((await run.step()) === 0) return;
    }
  };

  const flush = async () => {
    // The broker's clock is the virtual one: tell the runner, as a popped createdAt would.
    run.clock.observe(clock.now(), clock.now());
    await run.flush();
  };

  const partitions = async (queue = plan.sourceQueue): Promise<{ id: string; name: string }[]> => {
    const out: { id: string; name: string }[] = [];
    for (let offset = 0; ; ) {
      const res = await broker.http('GET', `/api/v1/resources/queues/${encodeURIComponent(queue)}?limit=1000&offset=${offset}`);
      if (res.status === 404) return out;
      if (res.status !== 200) throw new Error(`testStream: reading ${queue} failed (${res.status})`);
      const page = (res.body.partitions ?? []) as { id: string; name: string }[];
      out.push(...page);
      offset += page.length;
      if (page.length < 1000) return out;
    }
  };

  /** Where the query's state lives: each source partition, or a join's shard per partition name of either queue. */
  const statePartitions = async (): Promise<{ id: string; name: string }[]> => {
    if (!plan.join) return partitions();
    const names = new Set([...(await partitions()), ...(await partitions(plan.join.rightQueue))].map((p) => p.name));
    return [...names].map((name) => ({ id: joinShardId(plan.sourceQueue, name), name }));
  };

  const advanceTo = async (at: number | string | Date) => {
    await clock.set(at);
    await settle();
    await flush();
    return readSink();
  };

  let stopping: Promise<void> | undefined;
  return {
    broker,
    queryId,
    queryUuid: run.queryUuid,
    now: () => clock.now(),
    async push(payloads, pushOptions = {}) {
      if (payloads.length > 0) {
        const items = payloads.map((payload) => ({ queue: plan.sourceQueue, payload, ...(pushOptions.partition ? { partition: pushOptions.partition } : {}) }));
        const res = await broker.http('POST', '/api/v1/push', { items });
        if (res.status !== 201) throw new Error(`testStream: push to ${plan.sourceQueue} failed (${res.status}): ${JSON.stringify(res.body)}`);
      }
      await settle();
      return readSink();
    },
    advance: (ms) => advanceTo(clock.now() + ms),
    advanceTo,
    async flush() {
      await flush();
      return readSink();
    },
    emits: () => [...all],
    async state(options = {}) {
      const rows: StateRow[] = [];
      for (const p of await statePartitions()) {
        const res = await broker.http('POST', '/streams/v1/state/get', { query_id: run.queryUuid, partition_id: p.id });
        if (res.status !== 200) throw new Error(`testStream: state/get failed (${res.status}): ${JSON.stringify(res.body)}`);
        for (const r of res.body.rows) {
          if (!options.bookkeeping && isBookkeepingKey(r.key)) continue;
          rows.push({ partition: p.name, partitionId: p.id, key: r.key, value: r.value, version: Number(r.version) });
        }
      }
      return rows.sort((a, b) => (a.partition === b.partition ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : a.partition < b.partition ? -1 : 1));
    },
    async deadLetters() {
      const out: DeadLetter[] = [];
      for (let offset = 0; ; ) {
        const res = await broker.http('GET', `/api/v1/dlq?queue=${encodeURIComponent(plan.sourceQueue)}&consumerGroup=${encodeURIComponent(run.consumerGroup)}&limit=1000&offset=${offset}`);
        if (res.status !== 200) throw new Error(`testStream: reading the DLQ failed (${res.status}): ${JSON.stringify(res.body)}`);
        for (const m of res.body.messages) out.push({ data: m.data, partition: m.partition, offset: m.offset, transactionId: m.transactionId, errorMessage: m.errorMessage, retryCount: m.retryCount });
        offset += res.body.messages.length;
        if (res.body.messages.length < 1000) return out;
      }
    },
    deadEmits: readDeadEmits,
    errors,
    metrics: () => run.metrics(),
    stop: () =>
      (stopping ??= (async () => {
        try {
          await run.stop();
        } finally {
          await own?.stop();
        }
      })()),
  };
}
