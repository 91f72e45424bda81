import { kvNamespace } from '@queen-mq/protocol';
import type { OperatorContext } from './plugins.js';
import { chainError } from './chain-error.js';

/** What `.lookup()` does with a value whose key the KV does not hold. */
export type LookupMissing = 'skip' | 'null' | 'dlq';

/** `.lookup(namespace, keyFn, options)`. */
export interface LookupOptions {
  /** The field the entry's value is added as (default `'lookup'`). */
  as?: string;
  /**
   * A key the KV does not hold (or a key function answering null/undefined):
   * `'skip'` drops the value, `'null'` (default) adds the field as null,
   * `'dlq'` fails the source message (redelivered, then dead-lettered past
   * the source queue's retryLimit, like a message an operator throws on).
   */
  missing?: LookupMissing;
}

/**
 * A lookup (enrich) stage: reads KV entries of one namespace inside the
 * cycle's transaction. The runner reads every key of a batch once, and the
 * cycle commits only if each entry still has the version read (else it is
 * recomputed), so each output used a value committed at its cycle's commit.
 */
export interface LookupStage {
  readonly kind: 'lookup';
  readonly namespace: string;
  readonly as: string;
  readonly missing: LookupMissing;
  readonly code: string;
  /** The KV key of a value, or null/undefined for none. */
  key(value: any, ctx: OperatorContext): string | number | null | undefined;
}

export function lookupStage(namespace: string, key: (value: any, ctx: OperatorContext) => string | number | null | undefined, options: LookupOptions = {}): LookupStage {
  if (!kvNamespace.safeParse(namespace).success) throw chainError(`.lookup(): the namespace must match [A-Za-z0-9._:-]{1,128}, got ${JSON.stringify(namespace)}`);
  if (typeof key !== 'function') throw chainError('.lookup() requires a key function');
  if (options === null || typeof options !== 'object') throw chainError('.lookup(): options must be an object ({ as, missing })');
  for (const name of Object.keys(options)) if (name !== 'as' && name !== 'missing') throw chainError(`.lookup(): unknown option "${name}"; accepted: as, missing`);
  const as = options.as ?? 'lookup';
  if (typeof as !== 'string' || as === '') throw chainError('.lookup(): { as } must be a non-empty string');
  const missing = options.missing ?? 'null';
  if (missing !== 'skip' && missing !== 'null' && missing !== 'dlq') throw chainError(`.lookup(): { missing } must be "skip", "null" or "dlq", got ${JSON.stringify(missing)}`);
  return { kind: 'lookup', namespace, as, missing, code: key.toString(), key };
}
