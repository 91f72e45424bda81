import { context, trace, type Span } from '@opentelemetry/api';
import { consumerParent, endSpan, startMessagingSpan, traceIdAsUuid, traceparentOf, tracingEnabled } from '@queen-mq/client';
import type { Commit, PartitionBatch } from './commit.js';
import { perRunner, type RunnerContext } from '../context/runner-context.js';
import type { CyclePushItem, CycleResponse } from '../context/wire.js';

// OpenTelemetry spans of the runner (README "Tracing"), after the messaging
// semantic conventions, with the client's helpers (same attributes, same
// off switch):
//   process <source>  a cycle over one partition's batch (CONSUMER); parent:
//                     the first traced message's traceparent, links: all of them
//   flush <source>    an idle flush that commits (closed windows, no messages)
//   push <sink>       the cycle's commit carrying sink pushes (PRODUCER), child
//                     of the cycle or flush; every pushed message carries it as
//                     its traceparent, so the sink's consumers continue the trace
// The pop that fed the cycle is the client's `pop <source>` span. The source
// ack commits in the same transaction as the sink pushes, so it has no span
// of its own. With no tracer provider registered none of this runs.

/**
 * The cycle span open on each partition of a runner. The partition lock runs
 * one cycle or flush per partition at a time, so the commit of that cycle
 * finds its parent here without threading it through every shape's code.
 */
const openCycles = new WeakMap<RunnerContext, Map<string, Span>>();

const streamAttributes = (rt: RunnerContext) => ({ 'queen.stream.query': rt.queryName });

/** Runs one partition batch's cycle (`run`, which never throws) inside a `process` span. */
export async function traceCycle(rt: RunnerContext, batch: PartitionBatch, run: () => Promise<void>): Promise<void> {
  if (!tracingEnabled()) return run();
  const { parent, links } = consumerParent(batch.messages);
  const span = startMessagingSpan({
    operation: 'process',
    queue: rt.plan.sourceQueue,
    count: batch.messages.length,
    consumerGroup: rt.consumerGroup,
    partitionId: batch.partitionId,
    ...(batch.messages.length === 1 ? { messageId: batch.messages[0]!.id } : {}),
    attributes: streamAttributes(rt),
    parent,
    links,
  });
  const open = perRunner(openCycles, rt);
  open.set(batch.partitionId, span);
  try {
    await run();
  } finally {
    open.delete(batch.partitionId);
    span.end();
  }
}

/**
 * Sends one commit (`send` with the push items to use): inside the open
 * cycle's span, or a `flush` span of its own for an idle flush, with a
 * `push` span around it when it carries sink pushes, whose traceparent each
 * pushed message gets. A refused commit marks the spans failed (error.type:
 * the answer's code).
 */
export async function traceCommit(rt: RunnerContext, c: Commit, send: (items: CyclePushItem[]) => Promise<CycleResponse>): Promise<CycleResponse> {
  const cycle = openCycles.get(rt)?.get(c.partitionId);
  if (!cycle && (c.ack !== null || !tracingEnabled())) return send(c.pushItems);
  const flush = cycle
    ? undefined
    : startMessagingSpan({
        operation: 'flush',
        queue: rt.plan.sourceQueue,
        consumerGroup: rt.consumerGroup,
        partitionId: c.partitionId,
        attributes: { ...streamAttributes(rt), 'queen.stream.emits': c.emits },
      });
  const owner = (cycle ?? flush)!;
  let push: Span | undefined;
  let items = c.pushItems;
  if (items.length > 0) {
    const queue = items[0]!.queue;
    push = startMessagingSpan({
      operation: 'push',
      queue: items.every((i) => i.queue === queue) ? queue : undefined,
      count: items.length,
      parent: trace.setSpan(context.active(), owner),
    });
    const traceparent = traceparentOf(push);
    if (traceparent) {
      const traceId = traceIdAsUuid(traceparent);
      items = items.map((i) => ({ ...i, traceId: i.traceId ?? traceId, traceparent }));
    }
  }
  const spans = [push, flush].filter((s): s is Span => s !== undefined);
  let res: CycleResponse;
  try {
    res = await send(items);
  } catch (err) {
    for (const s of spans) endSpan(s, err);
    if (cycle) endSpan(cycle, err);
    throw err;
  }
  // A refusal is an answer, not an exception: the spans say it with its code.
  const refusal = res.success ? undefined : Object.assign(new Error(res.error ?? res.code ?? 'cycle refused'), { code: res.code ?? 'INTERNAL_ERROR' });
  for (const s of spans) endSpan(s, refusal);
  if (cycle && refusal) cycle.setAttribute('error.type', refusal.code);
  return res;
}
