/**
 * A message as popped from the source queue (PROTOCOL §5.4). It is the value
 * the first operator receives; a reducer or sink that still gets this very
 * object reads its `data`.
 */
export interface SourceMessage<D = any> {
  id: string;
  transactionId: string;
  traceId: string | null;
  data: D;
  producerSub: string | null;
  createdAt: string;
  partitionId: string;
  partition: string;
  queue: string;
  leaseId: string;
  consumerGroup: string;
  offset: string;
  retryCount: number;
}

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
