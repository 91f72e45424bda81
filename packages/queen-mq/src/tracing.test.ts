import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { context, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { eventually } from '@queen-mq/testing';
import { Stream, type PoppedMessage } from './index.js';
import { collectUntil, drain, useStreamBroker, runDefaults } from '../test/helpers.js';

// Issue 16 item 5, tracing: OpenTelemetry spans after the messaging semantic
// conventions, the W3C traceparent carried on every message, one trace from
// the producer through a stream cycle and its sink push to the sink's
// consumer — over real HTTP against the real broker, spans collected by the
// SDK's in-memory exporter. Off (no provider registered), nothing is added
// to the messages.

const env = useStreamBroker();
const exporter = new InMemorySpanExporter();

const uuidOf = (traceId: string) => `${traceId.slice(0, 8)}-${traceId.slice(8, 12)}-${traceId.slice(12, 16)}-${traceId.slice(16, 20)}-${traceId.slice(20)}`;

function only(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((s) => s.name === name);
  expect(found.map((s) => s.name), `spans named ${name} among ${spans.map((s) => s.name).join(', ')}`).toEqual([name]);
  return found[0]!;
}

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const linkedTo = (s: ReadableSpan) => s.links.map((l) => l.context.spanId);

describe('tracing off (no tracer provider registered)', () => {
  it('T0 a client push, a stream cycle and its sink push add no traceparent and no traceId', async () => {
    const { b, queen, names, track } = env;
    const { src, sink, queryId } = await names('trace-off');
    track(await Stream.from(queen.queue(src)).map((m) => ({ total: m.data.order * 10 })).to(queen.queue(sink)).run({ queryId, url: b.url, ...runDefaults }));
    await queen.queue(src).push({ payload: { order: 1 } });
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 8000);
    expect(got.map((m: any) => [m.data, m.traceId, m.traceparent])).toEqual([[{ total: 10 }, null, null]]);
    const source = await drain(b, src);
    expect(source.map((m: any) => [m.data, m.traceId, m.traceparent])).toEqual([[{ order: 1 }, null, null]]);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});

describe('tracing on (BasicTracerProvider + InMemorySpanExporter)', () => {
  const contextManager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  });
  afterAll(() => {
    trace.disable();
    context.disable();
  });

  it('T1 one trace: checkout → push src → process src (stream cycle) → push sink (sink push) → process sink (consumer) → the handler’s own span', async () => {
    const { b, queen, names, track } = env;
    const { src, sink, queryId } = await names('trace-on');
    const handle = track(
      await Stream.from(queen.queue(src)).map((m) => ({ total: m.data.order * 10 })).to(queen.queue(sink)).run({ queryId, url: b.url, ...runDefaults }),
    );
    const tracer = trace.getTracer('tracing.test');

    // The producer's own span is the parent of the client's push (the active context).
    const checkout = tracer.startSpan('checkout');
    const [pushed] = await context.with(trace.setSpan(ROOT_CONTEXT, checkout), () => queen.queue(src).push({ payload: { order: 1 } }));
    checkout.end();

    // The sink's consumer: a process span per message, the handler's spans under it, then the ack.
    const handled: PoppedMessage[] = [];
    const consumer = queen.queue(sink).consume(
      (m) => {
        tracer.startSpan('handle').end();
        handled.push(m);
      },
      { wait: 200 },
    );
    await eventually(async () => handled.length === 1, 10000);
    await consumer.stop();
    await handle.stop();

    const spans = exporter.getFinishedSpans();
    const traceId = checkout.spanContext().traceId;
    const pushSrc = only(spans, `push ${src}`);
    const processSrc = only(spans, `process ${src}`);
    const pushSink = only(spans, `push ${sink}`);
    const processSink = only(spans, `process ${sink}`);
    const user = only(spans, 'handle');
    const ackSink = only(spans, `ack ${sink}`);

    // The chain of parents, one trace from end to end.
    expect(parentOf(pushSrc)).toBe(checkout.spanContext().spanId);
    // Once seen with no parent: the pop delivered the message with traceparent null (read in a snapshot older than the claim's; migration 014). What the span saw, if it ever comes back.
    const cycleSaw = { links: processSrc.links.map((l) => l.context.spanId), attributes: processSrc.attributes, pushed: pushed!.transaction_id };
    expect(parentOf(processSrc), JSON.stringify(cycleSaw)).toBe(pushSrc.spanContext().spanId);
    expect(parentOf(pushSink)).toBe(processSrc.spanContext().spanId);
    expect(parentOf(processSink)).toBe(pushSink.spanContext().spanId);
    expect(parentOf(user)).toBe(processSink.spanContext().spanId);
    for (const s of [pushSrc, processSrc, pushSink, processSink, user]) expect(s.spanContext().traceId).toBe(traceId);
    // Consumers link to the creation context of what they consumed, as the conventions ask.
    expect(linkedTo(processSrc)).toEqual([pushSrc.spanContext().spanId]);
    expect(linkedTo(processSink)).toEqual([pushSink.spanContext().spanId]);
    // The runner's pop of the source (a receive) links to the pushed message too.
    const popSrc = spans.filter((s) => s.name === `pop ${src}`);
    expect(popSrc.flatMap(linkedTo)).toEqual([pushSrc.spanContext().spanId]);

    // What the messages carry: the W3C traceparent of the span that pushed them, and the trace id as Queen's traceId.
    const [emitted] = handled;
    expect(emitted).toMatchObject({ data: { total: 10 }, traceId: uuidOf(traceId), traceparent: `00-${traceId}-${pushSink.spanContext().spanId}-01` });
    const [source] = await drain(b, src);
    expect(source).toMatchObject({ data: { order: 1 }, traceId: uuidOf(traceId), traceparent: `00-${traceId}-${pushSrc.spanContext().spanId}-01` });

    // Kinds and semantic-convention attributes.
    expect([pushSrc, processSrc, pushSink, processSink, ackSink].map((s) => [s.kind, s.attributes['messaging.operation.type']])).toEqual([
      [SpanKind.PRODUCER, 'send'],
      [SpanKind.CONSUMER, 'process'],
      [SpanKind.PRODUCER, 'send'],
      [SpanKind.CONSUMER, 'process'],
      [SpanKind.CLIENT, 'settle'],
    ]);
    expect(pushSrc.attributes).toMatchObject({ 'messaging.system': 'queen', 'messaging.destination.name': src, 'messaging.operation.name': 'push', 'messaging.message.id': pushed!.message_id });
    expect(processSrc.attributes).toMatchObject({
      'messaging.system': 'queen',
      'messaging.destination.name': src,
      'messaging.operation.name': 'process',
      'messaging.consumer.group.name': `streams.${queryId}`,
      'messaging.destination.partition.id': pushed!.partition_id,
      'messaging.message.id': pushed!.message_id,
      'queen.stream.query': queryId,
    });
    expect(pushSink.attributes).toMatchObject({ 'messaging.destination.name': sink, 'messaging.operation.name': 'push' });
    expect(processSink.attributes).toMatchObject({ 'messaging.destination.name': sink, 'messaging.message.id': emitted!.id });
    expect(ackSink.attributes).toMatchObject({ 'messaging.destination.name': sink, 'messaging.operation.name': 'ack' });
    for (const s of [pushSrc, processSrc, pushSink, processSink, ackSink]) expect(s.status.code, s.name).not.toBe(2);
  });

  it('T2 a window closed by the idle flush: a flush span parents the sink push, whose traceparent its emit carries', async () => {
    const { b, queen, names, track } = env;
    const { src, sink, queryId } = await names('trace-flush');
    exporter.reset();
    track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 1, idleFlushMs: 100 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await queen.queue(src).push([{ payload: { n: 1 } }, { payload: { n: 2 } }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 10000, 300);
    expect(got.map((m) => m.data)).toEqual([{ count: 2 }]);

    const spans = exporter.getFinishedSpans();
    const pushSrc = only(spans, `push ${src}`);
    expect(pushSrc.attributes['messaging.batch.message_count']).toBe(2);
    // The cycle that folded both messages: parented by (and linked to) their one creation context.
    const processSrc = only(spans, `process ${src}`);
    expect(parentOf(processSrc)).toBe(pushSrc.spanContext().spanId);
    expect(processSrc.attributes['messaging.batch.message_count']).toBe(2);
    // The flush that closed the window has no message to continue: a trace of its own.
    const flush = only(spans, `flush ${src}`);
    expect(flush.parentSpanContext).toBeUndefined();
    expect(flush.attributes).toMatchObject({ 'messaging.operation.name': 'flush', 'messaging.operation.type': 'process', 'queen.stream.query': queryId, 'queen.stream.emits': 1 });
    const pushSink = only(spans, `push ${sink}`);
    expect(parentOf(pushSink)).toBe(flush.spanContext().spanId);
    expect((got[0] as any).traceparent).toBe(`00-${flush.spanContext().traceId}-${pushSink.spanContext().spanId}-01`);
  });
});
