import type { Json } from './plugins.js';
import { chainError } from './chain-error.js';
import { SEP } from './keys.js';

/** A state row as `migrateState` sees it and answers it: its key (PROTOCOL §7.6) and its value. */
export interface MigratedRow {
  key: string;
  value: Json;
}

/**
 * Rewrites one state row of the registered version into the new version's
 * meaning: answer the row (`key` may change, e.g. a window of another size),
 * or null to delete it. Runs once per row, for one partition at a time, when
 * a new version whose state is incompatible is deployed (see the core README,
 * "Deploying a new version of a query").
 */
export type MigrateState = (row: MigratedRow) => MigratedRow | null;

/** What every stage of a chain takes as its last argument (`.map(fn, { name: 'enrich' })`). */
export interface StageOptions {
  /**
   * The stage's stable name: a new version of the query is compared with the
   * registered one stage by stage, by name. Default: the stage's kind and its
   * rank among stages of that kind (`map-1`, `filter-2`), `window`, `reducer`,
   * `gate`, `sink`.
   */
  name?: string;
  /** Stateful stages only (a window, its reducer, a gate): rewrites the registered version's rows when this stage's state is incompatible. */
  migrateState?: MigrateState;
  /**
   * Stateful stages that are not a window (a gate): a key whose row was not
   * written for this many seconds is deleted by the broker's maintenance
   * pass (its next message starts from `{}`). Windows need none: a window's
   * row goes when the window closes.
   */
  stateTtlSeconds?: number;
}

/** The options as a chain link keeps them. */
export interface StageMeta {
  name?: string;
  migrateState?: MigrateState;
  stateTtlSeconds?: number;
  /** The source text of the stage's functions: hashed into its code hash, never into the config hash. */
  code: string;
}

/** Checks a builder call's stage options; throws VALIDATION_FAILED at the call. */
export function stageMeta(label: string, options: StageOptions | undefined, code: string, stateful: boolean, expires = false): StageMeta {
  if (options === undefined) return { code };
  if (options === null || typeof options !== 'object') throw chainError(`${label}: stage options must be an object ({ name, migrateState, stateTtlSeconds })`);
  const { name, migrateState, stateTtlSeconds } = options;
  if (stateTtlSeconds !== undefined) {
    if (!Number.isInteger(stateTtlSeconds) || stateTtlSeconds < 1 || stateTtlSeconds > 315_360_000) throw chainError(`${label}: { stateTtlSeconds } must be an integer in 1..315360000`);
    if (!expires) throw chainError(`${label}: { stateTtlSeconds } is for a stateful stage that is not a window (a gate); a window's row goes when the window closes`);
  }
  if (name !== undefined && (typeof name !== 'string' || name === '' || name.length > 200 || name.includes(SEP))) {
    throw chainError(`${label}: { name } must be a non-empty string of at most 200 characters`);
  }
  if (migrateState !== undefined) {
    if (typeof migrateState !== 'function') throw chainError(`${label}: { migrateState } must be a function (row) => newRow | null`);
    if (!stateful) throw chainError(`${label}: { migrateState } is for a stage that holds state (a window, its reducer, a gate)`);
  }
  return { ...(name !== undefined ? { name } : {}), ...(migrateState ? { migrateState } : {}), ...(stateTtlSeconds !== undefined ? { stateTtlSeconds } : {}), code };
}

/** The source text of functions, for a code hash. */
export function codeOf(...parts: unknown[]): string {
  return parts.map((p) => (typeof p === 'function' ? p.toString() : JSON.stringify(p ?? null))).join('\n');
}
