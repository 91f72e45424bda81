import { afterEach, describe, expect, it } from 'vitest';
import { ProxyTracerProvider, trace, type Span } from '@opentelemetry/api';
import { consumerParent, spanContextOf, startMessagingSpan, traceIdAsUuid, traceparentOf, tracingEnabled } from './tracing.js';

// The client's tracing helpers without an SDK: the off switch, and the W3C
// traceparent written on pushed messages and read back from popped ones.
// The spans themselves, over a real broker, are in queen-mq's tracing.test.ts.

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

afterEach(() => trace.disable());

describe('tracing helpers', () => {
  it('are off until a tracer provider is registered, and on from then, for code already running', () => {
    expect(tracingEnabled()).toBe(false);
    // The API's own proxy stands in for an SDK's provider: anything but the no-op delegate counts.
    const provider = new ProxyTracerProvider();
    provider.setDelegate({ getTracer: () => new ProxyTracerProvider().getTracer('x') });
    expect(trace.setGlobalTracerProvider(provider)).toBe(true);
    expect(tracingEnabled()).toBe(true);
    trace.disable();
    expect(tracingEnabled()).toBe(false);
  });

  it('a no-op span has no traceparent, so nothing is added to a message', () => {
    const span = startMessagingSpan({ operation: 'push', queue: 'q' });
    expect(span.isRecording()).toBe(false);
    expect(traceparentOf(span)).toBeUndefined();
  });

  it('traceparent round-trips through a span context; the trace id becomes the v1 traceId UUID', () => {
    const sc = spanContextOf(TP)!;
    expect(sc).toEqual({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1, isRemote: true });
    expect(traceparentOf(trace.wrapSpanContext(sc) as Span)).toBe(TP);
    expect(traceparentOf(trace.wrapSpanContext({ ...sc, traceFlags: 0 }) as Span)).toBe(TP.replace(/01$/, '00'));
    expect(traceIdAsUuid(TP)).toBe('0af76519-16cd-43dd-8448-eb211c80319c');
    for (const bad of [null, undefined, '', 'x', TP.toUpperCase(), `00-${'0'.repeat(32)}-b7ad6b7169203331-01`, '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01']) {
      expect(spanContextOf(bad), String(bad)).toBeUndefined();
    }
  });

  it('consumed messages: the first traced one is the parent, every traced one a link, untraced ones nothing', () => {
    const other = '00-11111111111111111111111111111111-2222222222222222-00';
    const { parent, links } = consumerParent([{ traceparent: null }, { traceparent: TP }, {}, { traceparent: other }]);
    expect(trace.getSpanContext(parent)).toEqual(spanContextOf(TP));
    expect(links.map((l) => l.context)).toEqual([spanContextOf(TP), spanContextOf(other)]);
    const none = consumerParent([{ traceparent: null }]);
    expect(none.links).toEqual([]);
    expect(trace.getSpanContext(none.parent)).toBeUndefined();
  });
});
