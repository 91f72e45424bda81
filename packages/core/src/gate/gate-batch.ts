import type { CompiledQuery } from '../plan/compile.js';
import type { GateContext, GateDecision } from '../plan/plugins.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateOp, StateRow } from '../context/wire.js';
import { runPostStages, runPreStages, type KeyedValue } from '../commit/pre-ops.js';
import { gateStateKey } from '../plan/keys.js';
import { messageIdentity } from '../commit/transaction-id.js';

/**
 * Thrown when a gate throws or answers something other than a boolean or
 * {allow}; `offset` is the source message it was evaluating (poison, see poison.ts).
 */
export class GateEvalError extends Error {
  constructor(message: string, cause?: unknown, readonly offset?: string) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'GateEvalError';
  }
}

interface PreparedGateBatch {
  perMessage: { message: SourceMessage; values: KeyedValue[] }[];
  /** State keys the gate will read (escaped user keys). */
  keys: string[];
}

/** An output of an allowed message, before the sink. */
interface GateOutput {
  identity: string;
  values: unknown[];
  message: SourceMessage;
  key: string;
}

interface GateResult {
  stateOps: StateOp[];
  outputs: GateOutput[];
  /** Messages allowed before the first deny (all of them when none denied). */
  allowedMessages: number;
  /** Gate evaluations that allowed, within the allowed prefix. */
  allows: number;
  denied: boolean;
}

export function prepareGateBatch(plan: CompiledQuery, messages: readonly SourceMessage[]): PreparedGateBatch {
  const perMessage = messages.map((message) => ({ message, values: runPreStages(plan.pre, message) }));
  const keys = new Set<string>();
  for (const m of perMessage) for (const v of m.values) keys.add(gateStateKey(v.key));
  return { perMessage, keys: [...keys] };
}

function decide(decision: GateDecision | unknown): boolean {
  if (decision === true || decision === false) return decision;
  if (decision !== null && typeof decision === 'object' && typeof (decision as { allow?: unknown }).allow === 'boolean') {
    return (decision as { allow: boolean }).allow;
  }
  throw new GateEvalError(`gate returned ${JSON.stringify(decision)}; expected a boolean or {allow: boolean}`);
}

/**
 * A key whose row an allowed evaluation cleared (`ctx.state = null` or
 * `undefined`): its next evaluation in the batch starts from `{}`, and the
 * batch deletes the stored row, if there is one.
 */
const CLEARED = Symbol('cleared');

/**
 * Evaluates the gate per message in source order (PROTOCOL §7.6). Each
 * evaluation sees a copy of its key's row as `ctx.state`; an allow keeps what
 * the gate left in `ctx.state` (mutated in place or reassigned), a deny throws
 * away every change of that message and stops the batch. An async gate is
 * awaited before the next message is evaluated (source order). `now` is the
 * clock handed to the gate as `ctx.streamTimeMs` (the runner passes the
 * broker's clock).
 */
export async function evaluateGateBatch(
  plan: CompiledQuery,
  prepared: PreparedGateBatch,
  stored: ReadonlyMap<string, StateRow>,
  now: () => number = Date.now,
): Promise<GateResult> {
  const gate = plan.gate!;
  // Per key: the row as the allowed evaluations left it, or CLEARED.
  let working = new Map<string, unknown>();
  const outputs: GateOutput[] = [];
  let allowedMessages = 0;
  let allows = 0;
  let denied = false;
  for (const { message, values } of prepared.perMessage) {
    const attempt = new Map(working);
    const messageOutputs: unknown[] = [];
    let messageAllows = 0;
    let key = message.partitionId;
    for (const v of values) {
      const stateKey = gateStateKey(v.key);
      const current = attempt.has(stateKey) ? attempt.get(stateKey) : stored.get(stateKey)?.value;
      // The gate may reassign ctx.state, so its answer is read from ctx after the call, never from a local.
      const gateCtx: GateContext = {
        state: current === CLEARED || current == null ? {} : structuredClone(current),
        streamTimeMs: now(),
        key: v.key,
        partition: message.partition,
        partitionId: message.partitionId,
      };
      let allow: boolean;
      try {
        allow = decide(await gate.evaluate(v.value, gateCtx));
      } catch (err) {
        if (err instanceof GateEvalError) throw new GateEvalError(`${err.message} (message at offset ${message.offset})`, err, message.offset);
        throw new GateEvalError(`gate threw on the message at offset ${message.offset}: ${err instanceof Error ? err.message : String(err)}`, err, message.offset);
      }
      if (!allow) {
        denied = true;
        break;
      }
      messageAllows += 1;
      attempt.set(stateKey, gateCtx.state == null ? CLEARED : gateCtx.state);
      key = v.key;
      const ctx = { partition: message.partition, partitionId: message.partitionId, key: v.key, offset: message.offset };
      messageOutputs.push(...runPostStages(plan.post, v.value, ctx));
    }
    if (denied) break;
    working = attempt;
    allowedMessages += 1;
    allows += messageAllows;
    outputs.push({ identity: messageIdentity(message.offset), values: messageOutputs, message, key });
  }
  const stateOps: StateOp[] = [];
  for (const [key, value] of working) {
    const version = stored.get(key)?.version;
    if (value !== CLEARED) stateOps.push({ type: 'upsert', key, value, expected_version: version ?? 0 });
    // A key cleared with no stored row has nothing to delete (a fenced delete of an absent row fails, §7.4).
    else if (version !== undefined) stateOps.push({ type: 'delete', key, expected_version: version });
  }
  return { stateOps, outputs, allowedMessages, allows, denied };
}
