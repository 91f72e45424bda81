import { z } from 'zod';

// Queries that evolve (issue 33): every stage of a chain is registered with a
// stable name and two hashes, one of what decides its state's meaning and one
// of its code, so a new version of a query can be compared with the one that
// is registered, stage by stage, before it is applied. The comparison lives
// here because the broker (register, plan) and the clients (plan output) must
// answer it the same way.

/** One stage of a registered chain, as the runner describes it. */
export const streamStage = z.object({
  /** Given (`{ name }`) or derived from the stage's kind and its rank among stages of that kind. */
  name: z.string().min(1).max(200),
  kind: z.string().min(1).max(200),
  /** Holds state rows (a window, its reducer, a gate). */
  stateful: z.boolean(),
  /** A stateless stage before the stateful one: what it emits is what the state folds. */
  feeds_state: z.boolean(),
  /** Hash of what decides the meaning of the stage's rows (window kind and options, reducer fields, key extractor presence, gate identity); null when stateless. */
  state_hash: z.string().min(1).max(128).nullable(),
  /** Hash of the stage's code (its functions' source text). */
  code_hash: z.string().min(1).max(128),
});
export type StreamStage = z.infer<typeof streamStage>;
export const streamStages = z.array(streamStage).max(1000);

/**
 * What a new version does to one stage:
 * - `unchanged`
 * - `code-changed`: a stateless stage whose output no state folds: safe
 * - `state-compatible`: rows are kept as they are, but what they fold changes
 *   (a stage before the state, or the stateful stage's own code): needs consent
 * - `state-incompatible`: the rows' meaning changed (window size, reducer fields, key): reset or migrate
 * - `added`, `removed`
 */
export const stageChange = z.enum(['unchanged', 'code-changed', 'state-compatible', 'state-incompatible', 'added', 'removed']);
export type StageChange = z.infer<typeof stageChange>;

/** What happens to a stateful stage's live rows: kept, dropped (reset), rewritten by `migrateState`, or none held. */
export const stateAction = z.enum(['keep', 'drop', 'migrate', 'none']);

export const planStage = z.object({
  name: z.string(),
  kind: z.string(),
  change: stageChange,
  stateful: z.boolean(),
  /** Live state rows of the query this stage holds (every stateful stage of a chain shares the query's rows). */
  state_rows: z.number().int(),
  state_action: stateAction,
});
export type PlanStage = z.infer<typeof planStage>;

/**
 * The plan's verdict: `same` (nothing changed), `safe` (resumes as is),
 * `keep-state` (resumes with `upgrade: 'keep-state'`), `blocked` (needs
 * `reset`, or `migrateState` on every state-incompatible stage).
 */
export const planVerdict = z.enum(['same', 'safe', 'keep-state', 'blocked']);
export type PlanVerdict = z.infer<typeof planVerdict>;

export const streamPlan = z.object({
  verdict: planVerdict,
  stages: z.array(planStage),
  /** Stages that keep the verdict at `blocked` (state-incompatible without a migration, or a removed stateful stage holding rows). */
  blocking: z.array(z.string()),
});
export type StreamPlan = z.infer<typeof streamPlan>;

const RANK: Record<PlanVerdict, number> = { same: 0, safe: 1, 'keep-state': 2, blocked: 3 };

/**
 * Compares a proposed chain with the registered one, stage by stage (matched
 * by name). `stateRows` is the query's live row count; `migrating` names the
 * stages given a `migrateState`.
 */
export function planStages(registered: readonly StreamStage[], proposed: readonly StreamStage[], stateRows: number, migrating: ReadonlySet<string> = new Set()): StreamPlan {
  const before = new Map(registered.map((s) => [s.name, s]));
  const after = new Set(proposed.map((s) => s.name));
  const stages: PlanStage[] = [];
  const blocking: string[] = [];
  let verdict: PlanVerdict = 'same';
  const raise = (v: PlanVerdict) => void (RANK[v] > RANK[verdict] && (verdict = v));
  // A migration rewrites the query's rows once, whichever stateful stage asked for it.
  const migrates = proposed.some((s) => s.stateful && migrating.has(s.name));
  for (const s of proposed) {
    const old = before.get(s.name);
    let change: StageChange;
    if (!old) change = 'added';
    else if (old.stateful !== s.stateful || old.kind !== s.kind || (s.stateful && old.state_hash !== s.state_hash)) change = 'state-incompatible';
    else if (old.code_hash === s.code_hash && old.feeds_state === s.feeds_state) change = 'unchanged';
    else change = s.stateful || s.feeds_state ? 'state-compatible' : 'code-changed';
    const rows = s.stateful ? stateRows : 0;
    let action: PlanStage['state_action'] = s.stateful ? (rows > 0 ? 'keep' : 'none') : 'none';
    // Two stateless stages of one name are never incompatible: only what feeds a state needs consent.
    if (change === 'state-incompatible' && !old?.stateful && !s.stateful) change = s.feeds_state || old?.feeds_state ? 'state-compatible' : 'code-changed';
    if (change === 'state-incompatible') {
      if (migrates) {
        action = rows > 0 ? 'migrate' : 'none';
        raise('keep-state');
      } else {
        action = rows > 0 ? 'drop' : 'none';
        if (rows > 0) blocking.push(s.name);
        raise(rows > 0 ? 'blocked' : 'keep-state');
      }
    } else if (change === 'state-compatible' || (change === 'added' && s.feeds_state)) {
      if (migrates && s.stateful && rows > 0) action = 'migrate';
      raise('keep-state');
    } else if (change !== 'unchanged') {
      raise('safe');
    }
    stages.push({ name: s.name, kind: s.kind, change, stateful: s.stateful, state_rows: rows, state_action: action });
  }
  // The stateful stages of a chain share the query's rows: when one drops them, every one does.
  if (stages.some((s) => s.stateful && s.state_action === 'drop')) for (const s of stages) if (s.stateful && s.state_rows > 0) s.state_action = 'drop';
  for (const old of registered) {
    if (after.has(old.name)) continue;
    const rows = old.stateful ? stateRows : 0;
    stages.push({ name: old.name, kind: old.kind, change: 'removed', stateful: old.stateful, state_rows: rows, state_action: rows > 0 ? 'drop' : 'none' });
    if (rows > 0) {
      blocking.push(old.name);
      raise('blocked');
    } else raise(old.feeds_state ? 'keep-state' : 'safe');
  }
  return { verdict, stages, blocking };
}
