import { EventEmitter } from 'node:events';

/** Payloads of the runner's lifecycle events (namespaced, typed). */
export interface RunnerEvents {
  /** A cycle committed: state ops, sink pushes and the source ack landed together. */
  'cycle:commit': { partitionId: string; partition: string; messages: number; stateOps: number; pushes: number; emits: number };
  /** An idle flush committed: ripe windows of a quiet partition were emitted and deleted. */
  'window:flush': { partitionId: string; partition: string; stateOps: number; pushes: number; emits: number };
  /** The lease of a batch was gone when its cycle arrived; nothing of it was applied, the batch comes back. */
  'lease:lost': { partitionId: string; leaseId: string; code: string };
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
