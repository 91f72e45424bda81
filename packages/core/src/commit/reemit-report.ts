import { QueenError } from '@queen-mq/protocol';
import type { RunnerContext } from '../context/runner-context.js';
import type { CycleResponse } from '../context/wire.js';
import type { WindowEmit } from '../plan/plugins.js';

// The backstop behind the late rule (close-horizon.ts, lateHorizon): a
// window's emit carries a deterministic sink transactionId, so an emit of a
// window whose result is already stored is answered `duplicate` and stored
// nowhere. A replayed cycle never gets that far (its lease or versions fence
// it), so a committed cycle or flush whose window emit comes back duplicate
// means a window was closed twice under one identity — its second content is
// not in the sink. Whatever the cause (a race the late rule does not see, a
// gracePeriod raised between runs), it is never silent: counted, an event,
// and an error with a stable code.

/** A committed commit's window emits, by the transactionId of each push item they gave. */
export type EmitsByTransactionId = ReadonlyMap<string, WindowEmit>;

/**
 * After a commit: each window emit of `emits` one of whose items the sink
 * answered `duplicate` (the cycle asks for the duplicates' results, state-api.ts)
 * counts in `windowsReemittedTotal`, emits `window:reemitted` and goes to
 * onError as WINDOW_REEMITTED, once per window.
 */
export function reportReemittedWindows(rt: RunnerContext, res: CycleResponse, emits: EmitsByTransactionId, where: { partitionId: string; partition: string; flush: boolean }): void {
  if (!res.push_counts?.duplicate || emits.size === 0) return;
  const seen = new Set<WindowEmit>();
  for (const r of res.push_results) {
    const emit = r.status === 'duplicate' ? emits.get(r.transaction_id) : undefined;
    if (!emit || seen.has(emit)) continue;
    seen.add(emit);
    rt.metrics.windowsReemittedTotal += 1;
    rt.events.emit('window:reemitted', { partitionId: where.partitionId, partition: where.partition, key: emit.userKey, windowStart: emit.windowStart, windowEnd: emit.windowEnd, transactionId: r.transaction_id });
    const params = { start: iso(emit.windowStart), end: iso(emit.windowEnd), key: JSON.stringify(emit.userKey), partition: JSON.stringify(where.partition) };
    rt.report(new QueenError('WINDOW_REEMITTED', undefined, { params, extra: { partition_id: where.partitionId, transaction_id: r.transaction_id } }), {
      phase: where.flush ? 'flush' : 'cycle',
      partitionId: where.partitionId,
    });
  }
}

const iso = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms));
