import type { LateRecord } from '../plan/plugins.js';
import type { SinkOutput } from '../commit/sink-output.js';
import type { LateContribution } from './window-fold-shared.js';
import { lateRecordIdentity } from '../commit/transaction-id.js';

// The `onLate` sink's side of a window cycle: the late contributions a fold
// answered become LateRecords, handed to the late sink as outputs of the
// same cycle (their push items commit with the state ops and the ack).

/** Where the late records of one batch come from: the query and the source partition. */
interface LateSource {
  /** The query's name. */
  queryName: string;
  partition: string;
  partitionId: string;
}

/** One late contribution as the record the late sink receives. */
function lateRecordOf(source: LateSource, late: LateContribution): LateRecord {
  return {
    queryId: source.queryName,
    partition: source.partition,
    partitionId: source.partitionId,
    offset: late.entry.offset,
    key: late.entry.userKey,
    eventTimeMs: late.entry.ts,
    window: { start: late.window.start, end: late.window.end },
    watermarkMs: late.watermarkMs,
    latenessMs: late.latenessMs,
    value: late.entry.input,
  };
}

/**
 * The late sink's outputs: one per (missed window, source message), its
 * records in batch order. The identity `<window key>␟late-record␟<offset>`
 * and the output index (several values of one message after a flatMap) make
 * each record's sink transactionId deterministic, so a batch recomputed after
 * VERSION_CONFLICT or redelivered after a crash pushes the same ids: a record
 * whose cycle committed is a `duplicate`, never a second message.
 */
export function lateOutputs(source: LateSource, late: readonly LateContribution[]): SinkOutput[] {
  const byIdentity = new Map<string, SinkOutput & { values: LateRecord[] }>();
  for (const l of late) {
    const identity = lateRecordIdentity(l.windowKey, l.entry.offset);
    let out = byIdentity.get(identity);
    if (!out) {
      out = {
        identity,
        values: [],
        ctx: {
          partition: source.partition,
          partitionId: source.partitionId,
          key: l.entry.userKey,
          offset: l.entry.offset,
          windowKey: l.windowKey,
          windowStart: l.window.start,
          windowEnd: l.window.end,
        },
      };
      byIdentity.set(identity, out);
    }
    out.values.push(lateRecordOf(source, l));
  }
  return [...byIdentity.values()];
}
