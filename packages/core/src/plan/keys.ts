/**
 * State-row keys of PROTOCOL §7.6. Parts are joined with U+001F; a user key
 * is escaped (`%` → `%25`, U+001F → `%1F`) so it can never forge a separator,
 * and keys starting `__` are reserved for the runner (`__wm__`).
 */
export const SEP = '\u001f';
export { WATERMARK_STATE_KEY as WATERMARK_KEY } from '@queen-mq/protocol';
/** A join shard's bookkeeping row: each side's newest time and the partition's name. */
export const JOIN_CLOCK_KEY = '__join__';
/** Prefix of a join's buffered-record rows (`join␟left␟<key>`, `join␟right␟<key>`). */
export const JOIN_PREFIX = `join${SEP}`;

/** Whether a state row is the runner's bookkeeping (`__wm__`, `<tag>␟__closed__`, `__join__`): the protocol's rule. */
export { isBookkeepingStateKey as isBookkeepingKey } from '@queen-mq/protocol';

/** `join␟<side>␟<userKey>`: the records of one side and key a join holds. */
export function joinRecordsKey(side: 'left' | 'right', userKey: string): string {
  return `${JOIN_PREFIX}${side}${SEP}${escapeKeyPart(userKey)}`;
}

export function escapeKeyPart(part: string): string {
  // Most keys hold neither character: skip the two replaces (a window cycle escapes a key per message).
  if (!part.includes('%') && !part.includes(SEP)) return part;
  return part.replace(/%/g, '%25').replace(/\u001f/g, '%1F');
}

export function unescapeKeyPart(part: string): string {
  return part.replace(/%1F/g, '\u001f').replace(/%25/g, '%');
}

// The messages of a batch fall in few windows: the last start formatted is
// reused (formatting a Date was the runner's top cost in a tumbling cycle).
let lastIsoMs = NaN;
let lastIso = '';

/** ISO-8601 with milliseconds, UTC: `2026-01-05T10:00:00.000Z`. */
function isoMs(epochMs: number): string {
  if (epochMs !== lastIsoMs) {
    lastIso = new Date(epochMs).toISOString();
    lastIsoMs = epochMs;
  }
  return lastIso;
}

/** `<tag>␟<windowStart ISO ms>␟<userKey>` */
export function windowStateKey(tag: string, windowStartMs: number, userKey: string): string {
  return `${tag}${SEP}${isoMs(windowStartMs)}${SEP}${escapeKeyPart(userKey)}`;
}

/**
 * `<tag>␟open␟<userKey>`: the one row of a merging window (session) per key;
 * successive sessions of the key reuse it, so it is not their identity.
 */
export function openWindowStateKey(tag: string, userKey: string): string {
  return `${tag}${SEP}open${SEP}${escapeKeyPart(userKey)}`;
}

/** Prefix shared by every row of one window operator, for state/get `key_prefix`. */
export function windowKeyPrefix(tag: string): string {
  return `${tag}${SEP}`;
}

/** The user key of a window state key (the part after the last separator). */
export function userKeyOfWindowKey(stateKey: string): string {
  return unescapeKeyPart(stateKey.slice(stateKey.lastIndexOf(SEP) + 1));
}

/** A gate's state key is the escaped user key itself. */
export function gateStateKey(userKey: string): string {
  return escapeKeyPart(userKey);
}
