import type { OperatorContext, TransformStage } from '../plan/plugins.js';
import type { PreStage } from '../plan/compile.js';
import { markSource, payloadOf, type SourceMessage } from '../context/source-message.js';
import type { LookupStage } from '../plan/lookup.js';
import type { LookupReads } from './lookup-reads.js';

/** A value that left the per-message operators, with the state key it carries. */
export interface KeyedValue {
  value: unknown;
  key: string;
}

/**
 * Thrown when a user operator throws; the runner reports phase "operator".
 * `offset` names the source message it threw on, when there is one (a window
 * emit has none): that message is then handled as poison (see poison.ts).
 */
export class OperatorError extends Error {
  constructor(readonly stage: string, cause: unknown, readonly offset?: string) {
    super(`.${stage}() threw${offset === undefined ? '' : ` on the message at offset ${offset}`}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'OperatorError';
  }
}

/**
 * A lookup over one value: its key's entry added as the `as` field, or the
 * `missing` rule. A key not read yet drops the value and is left wanted in
 * `reads` (a first pass over the batch collects the keys to read).
 */
function lookupValue(stage: LookupStage, value: unknown, ctx: OperatorContext, reads: LookupReads | undefined): unknown[] {
  if (!reads) throw new Error('.lookup() ran without its KV reads');
  const raw = stage.key(value, ctx);
  const read = raw === null || raw === undefined ? null : reads.get(stage.namespace, String(raw));
  if (read === undefined) return [];
  if (read === null) {
    if (stage.missing === 'skip') return [];
    if (stage.missing === 'dlq') throw new Error(`no KV entry ${stage.namespace}/${String(raw)}`);
  }
  const payload = payloadOf(value);
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    throw new Error(`.lookup() adds a field "${stage.as}" to an object; got ${Array.isArray(payload) ? 'an array' : typeof payload} (map it to an object first)`);
  }
  return [{ ...(payload as object), [stage.as]: read === null ? null : read.value }];
}

/**
 * Runs the operators before the window/gate over one message. keyBy changes
 * the key of the values that pass it; the default key is the partition id.
 * A lookup reads its entries from `reads`.
 */
export function runPreStages(stages: readonly PreStage[], message: SourceMessage, reads?: LookupReads): KeyedValue[] {
  let values: KeyedValue[] = [{ value: markSource(message), key: message.partitionId }];
  for (const stage of stages) {
    const next: KeyedValue[] = [];
    for (const v of values) {
      const ctx: OperatorContext = { partition: message.partition, partitionId: message.partitionId, key: v.key, offset: message.offset };
      try {
        if (stage.kind === 'lookup' && 'namespace' in stage) {
          for (const out of lookupValue(stage, v.value, ctx, reads)) next.push({ value: out, key: v.key });
        } else if (stage.kind === 'keyBy' && 'key' in stage) {
          next.push({ value: v.value, key: String((stage as { key: (v: unknown, c: OperatorContext) => unknown }).key(v.value, ctx)) });
        } else {
          for (const out of (stage as TransformStage).transform(v.value, ctx)) next.push({ value: out, key: v.key });
        }
      } catch (err) {
        throw new OperatorError(stage.kind, err, message.offset);
      }
    }
    values = next;
    if (values.length === 0) break;
  }
  return values;
}

/** Runs the operators after a reducer or gate over one output. */
export function runPostStages(stages: readonly TransformStage[], value: unknown, ctx: OperatorContext): unknown[] {
  let values: unknown[] = [value];
  for (const stage of stages) {
    const next: unknown[] = [];
    for (const v of values) {
      try {
        next.push(...stage.transform(v, ctx));
      } catch (err) {
        throw new OperatorError(stage.kind, err, ctx.offset);
      }
    }
    values = next;
    if (values.length === 0) break;
  }
  return values;
}
