import { EventEmitter } from 'node:events';

/** Payloads of the runner's lifecycle events (namespaced, typed). */
export interface RunnerEvents {
  /** A cycle committed: state ops, sink pushes and the source ack landed together. */
  'cycle:commit': { partitionId: string; partition: string; messages: number; stateOps: number; pushes: number; emits: number };
  /** An idle flush committed: ripe windows of a quiet partition were emitted and deleted. */
  'window:flush': { partitionId: string; partition: string; stateOps: number; pushes: number; emits: number };
  /** The lease of a batch was gone when its cycle arrived; nothing of it was applied, the batch comes back. */
  'lease:lost': { partitionId: string; leaseId: string; code: string };
  /**
   * A poison message (a user function threw on it on every delivery) went to
   * the DLQ after `deliveries` deliveries (the source queue's retryLimit + 1);
   * `error` is the text stored in the DLQ row. The partition moved on.
   */
  'message:dead-lettered': { partitionId: string; partition: string; offset: string; transactionId: string; deliveries: number; error: string };
  /**
   * A closed window's post-window operator (or the sink's mapping) threw on
   * its value: the window closed, and instead of its sink items a record
   * went to `queue` (`streams.<query>.dead-letters`) in the same commit.
   */
  'emit:dead-lettered': { partitionId: string; partition: string; key: string; windowStart: number; windowEnd: number; queue: string; error: string };
  /**
   * A committed cycle or flush emitted a window whose result the sink already
   * held under the same transactionId (answered `duplicate`): this emit's
   * content is not stored. Also reported to onError as WINDOW_REEMITTED.
   */
  'window:reemitted': { partitionId: string; partition: string; key: string; windowStart: number; windowEnd: number; transactionId: string };
  /**
   * A cycle or flush found a sink queue at its maxSize (QUEUE_FULL): nothing
   * of it was committed. A cycle is sent again after `waitMs` (the wait
   * doubles while the sink stays full); a flush is tried again on its next
   * tick (`waitMs` 0). The source's lag grows meanwhile; nothing is dropped.
   */
  'sink:full': { partitionId: string; partition: string; queue: string; pending: number; maxSize: number; waitMs: number };
}

export type RunnerEventName = keyof RunnerEvents;

/** An EventEmitter whose `on`/`once`/`off`/`emit` are typed by {@link RunnerEvents}. */
export class RunnerEmitter extends EventEmitter {
  override on<E extends RunnerEventName>(event: E, listener: (payload: RunnerEvents[E]) => void): this {
    return super.on(event, listener);
  }

  override once<E extends RunnerEventName>(event: E, listener: (payload: RunnerEvents[E]) => void): this {
    return super.once(event, listener);
  }

  override off<E extends RunnerEventName>(event: E, listener: (payload: RunnerEvents[E]) => void): this {
    return super.off(event, listener);
  }

  override emit<E extends RunnerEventName>(event: E, payload: RunnerEvents[E]): boolean {
    return super.emit(event, payload);
  }
}
