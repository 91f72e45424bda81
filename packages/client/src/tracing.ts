import {
  context,
  isSpanContextValid,
  ProxyTracerProvider,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';

// OpenTelemetry spans of the client, after the messaging semantic conventions
// (span name `{messaging.operation.name} {destination}`, messaging.system
// "queen", the operation's well-known type beside Queen's own verb). The
// client depends on @opentelemetry/api only: with no SDK registered every
// span is the API's no-op, and tracingEnabled() lets the per-message work
// (a traceparent per pushed item, a link per popped message) be skipped
// outright, so tracing off costs one check per call.

/** The instrumentation scope of the client's spans (and of @queen-mq/core's, which use these helpers). */
const tracer = trace.getTracer('@queen-mq/client', '0.2.0');

// The global proxy's delegate while no SDK has registered a provider.
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/**
 * Whether a tracer provider is registered (an SDK's `register()` or
 * `trace.setGlobalTracerProvider`). Checked per call, so registering later
 * turns tracing on for running consumers. Only a fast path: a copy of
 * @opentelemetry/api other than ours answers true, and its no-op spans are
 * then merely created for nothing.
 */
export function tracingEnabled(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NOOP_PROVIDER;
}

/** Queen's verbs as messaging.operation.name, with their well-known messaging.operation.type. */
export type MessagingOperation = 'push' | 'pop' | 'ack' | 'process' | 'flush';
const OPERATION_TYPE: Record<MessagingOperation, string> = { push: 'send', pop: 'receive', ack: 'settle', process: 'process', flush: 'process' };
const SPAN_KIND: Record<MessagingOperation, SpanKind> = {
  // No per-message "create" spans: the push span is every pushed message's creation context, hence PRODUCER.
  push: SpanKind.PRODUCER,
  pop: SpanKind.CLIENT,
  ack: SpanKind.CLIENT,
  process: SpanKind.CONSUMER,
  flush: SpanKind.CONSUMER,
};

/** What a messaging span is about (semantic-convention attributes). */
export interface MessagingSpan {
  operation: MessagingOperation;
  /** The queue (messaging.destination.name); the span name is the operation alone when absent. */
  queue?: string;
  /** Messages in the operation: messaging.batch.message_count when more than one (the conventions set it for batches only). */
  count?: number;
  consumerGroup?: string;
  /** messaging.destination.partition.id (a partition's UUID). */
  partitionId?: string;
  /** messaging.message.id, for an operation on one message. */
  messageId?: string;
  /** Extra attributes (queen.* names). */
  attributes?: Attributes;
  /** The parent; default the active context. */
  parent?: Context;
  links?: Link[];
}

/** Starts a messaging span (see {@link MessagingSpan}); the caller ends it ({@link endSpan}). */
export function startMessagingSpan(s: MessagingSpan): Span {
  const attributes: Attributes = {
    'messaging.system': 'queen',
    'messaging.operation.name': s.operation,
    'messaging.operation.type': OPERATION_TYPE[s.operation],
  };
  if (s.queue !== undefined) attributes['messaging.destination.name'] = s.queue;
  if (s.count !== undefined && s.count > 1) attributes['messaging.batch.message_count'] = s.count;
  if (s.consumerGroup !== undefined) attributes['messaging.consumer.group.name'] = s.consumerGroup;
  if (s.partitionId !== undefined) attributes['messaging.destination.partition.id'] = s.partitionId;
  if (s.messageId !== undefined) attributes['messaging.message.id'] = s.messageId;
  if (s.attributes) Object.assign(attributes, s.attributes);
  const name = s.queue !== undefined ? `${s.operation} ${s.queue}` : s.operation;
  return tracer.startSpan(name, { kind: SPAN_KIND[s.operation], attributes, links: s.links }, s.parent ?? context.active());
}

/** Ends a span, marking it failed (status ERROR, error.type = the Queen error code or class name) when `err` is given. */
export function endSpan(span: Span, err?: unknown): void {
  if (err !== undefined) {
    const code = (err as { code?: unknown })?.code;
    span.setAttribute('error.type', typeof code === 'string' ? code : err instanceof Error ? err.name : 'Error');
    if (err instanceof Error) span.recordException(err);
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  }
  span.end();
}

/**
 * Runs `fn` inside `span` (the active span while it runs, so spans of the
 * HTTP call or of a handler nest under it); `onResult` may annotate the span
 * before it ends. Ended failed when `fn` throws.
 */
export async function inSpan<T>(span: Span, fn: () => T | Promise<T>, onResult?: (out: T, span: Span) => void): Promise<T> {
  try {
    const out = await context.with(trace.setSpan(context.active(), span), fn);
    onResult?.(out, span);
    endSpan(span);
    return out;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/** The span's context as a W3C `traceparent`, or undefined when it has none (a no-op span). */
export function traceparentOf(span: Span): string | undefined {
  const sc = span.spanContext();
  if (!isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * The W3C trace id as the UUID Queen v1's `traceId` field holds: messages a
 * tracing client pushes carry both, so v1 tools that show traceId show the
 * trace, and the broker knows which messages have a traceparent to read.
 */
export function traceIdAsUuid(traceparent: string): string {
  const t = traceparent.slice(3, 35);
  return `${t.slice(0, 8)}-${t.slice(8, 12)}-${t.slice(12, 16)}-${t.slice(16, 20)}-${t.slice(20)}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A message's `traceparent` as a remote span context; undefined when absent or malformed. */
export function spanContextOf(traceparent: string | null | undefined): SpanContext | undefined {
  if (!traceparent) return undefined;
  const m = TRACEPARENT.exec(traceparent);
  if (!m) return undefined;
  const sc: SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true };
  return isSpanContextValid(sc) ? sc : undefined;
}

/**
 * Parent and links of a span over consumed messages. The conventions ask
 * for a link to every message's creation context; the parent is the first
 * traced message's context, so a message followed alone (the usual case
 * for a trace) stays one tree from its producer through every consumer. Messages
 * without a traceparent contribute nothing; no traced message: the active context.
 */
export function consumerParent(messages: readonly { traceparent?: string | null }[]): { parent: Context; links: Link[] } {
  const links: Link[] = [];
  for (const m of messages) {
    const sc = spanContextOf(m.traceparent);
    if (sc) links.push({ context: sc });
  }
  const parent = links.length > 0 ? trace.setSpanContext(context.active(), links[0]!.context) : context.active();
  return { parent, links };
}
