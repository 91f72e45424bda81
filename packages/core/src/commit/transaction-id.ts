import { createHash } from 'node:crypto';
import { SEP } from '../plan/keys.js';

/**
 * The deterministic sink-push transactionId of PROTOCOL §7.6:
 * `sx-` + the first 40 hex chars of SHA-256(query_id ␟ partition_id ␟ identity ␟ outputIndex).
 * A replayed emit carries the same id and is reported `duplicate` by the sink
 * partition's dedup instead of being written twice.
 */
export function sinkTransactionId(queryId: string, partitionId: string, identity: string, outputIndex: number): string {
  const digest = createHash('sha256').update([queryId, partitionId, identity, String(outputIndex)].join(SEP)).digest('hex');
  return `sx-${digest.slice(0, 40)}`;
}

/** Identity of an output of a stateless chain or a gate: `msg␟<source offset>`. */
export function messageIdentity(offset: string): string {
  return `msg${SEP}${offset}`;
}

/** Identity of an `onLate:'include'` re-emit: the window key plus `␟late␟<newest source offset>`. */
export function lateIdentity(windowKey: string, newestOffset: string): string {
  return `${windowKey}${SEP}late${SEP}${newestOffset}`;
}

/**
 * Identity of a late record handed to an `onLate` sink: the state key of the
 * window it missed plus `␟late-record␟<source offset>` (one per window and
 * message; never the identity of a window emit or of an 'include' re-emit).
 */
export function lateRecordIdentity(windowKey: string, offset: string): string {
  return `${windowKey}${SEP}late-record${SEP}${offset}`;
}
