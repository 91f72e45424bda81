import type { PoppedMessage } from '@queen-mq/protocol';

/**
 * A message as popped from the source queue (PROTOCOL §5.4, the protocol's
 * PoppedMessage with a typed `data`). It is the value the first operator
 * receives; a reducer or sink that still gets this very object reads its `data`.
 */
export type SourceMessage<D = any> = Omit<PoppedMessage, 'data'> & { data: D };

const sourceMessages = new WeakSet<object>();

/** Marks a popped message so `payloadOf` can recognise it after operators. */
export function markSource<M extends object>(message: M): M {
  sourceMessages.add(message);
  return message;
}

/** The payload a value stands for when it reaches a reducer or a sink. */
export function payloadOf(value: unknown): unknown {
  return typeof value === 'object' && value !== null && sourceMessages.has(value) ? (value as SourceMessage).data : value;
}
