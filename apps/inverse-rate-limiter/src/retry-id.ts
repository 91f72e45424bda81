const RETRY = /^retry-(.+)-(\d+)$/;

/**
 * The transactionId of a message's next attempt, `retry-<original>-<n>`:
 * attempt n of the ORIGINAL id (not a growing chain), so dedup makes a
 * re-sent deferral harmless and the id stays short.
 */
export function retryTransactionId(transactionId: string): string {
  const m = RETRY.exec(transactionId);
  return m ? `retry-${m[1]}-${Number(m[2]) + 1}` : `retry-${transactionId}-1`;
}

/** The id the message had before any deferral. */
export function originalTransactionId(transactionId: string): string {
  return RETRY.exec(transactionId)?.[1] ?? transactionId;
}
