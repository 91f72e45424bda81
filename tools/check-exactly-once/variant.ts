// What one seed checks: a window kind (or the gate), its time domain, its
// grace / lateness / onLate options and the faults injected. Drawn from the
// seed, restricted by the CLI's filters (--kinds, --time, --on-late, --faults,
// --gate) so a variant that depends on one fix can be run apart.
import type { Rng } from './prng.js';

export const WINDOW_KINDS = ['tumbling', 'sliding', 'session', 'cron-unit', 'cron-expr'] as const;
export const KINDS = [...WINDOW_KINDS, 'gate', 'join'] as const;
export type Kind = (typeof KINDS)[number];
export type TimeDomain = 'processing' | 'event';
export type OnLate = 'drop' | 'include' | 'sink';
export const FAULTS = ['kill', 'lost', 'stall', 'restart'] as const;
export type Fault = (typeof FAULTS)[number];
export type GateStyle = 'mutate' | 'reassign';

export interface Variant {
  kind: Kind;
  /** Gate: always 'processing' (a gate has no window clock). */
  time: TimeDomain;
  graceS: number;
  /** Event time only. */
  allowedLatenessS: number;
  /** Event time only. */
  onLate: OnLate;
  idleFlushMs: number;
  /** sliding: window length and hop (ms); the size need not be a multiple of the slide. */
  sliding?: { sizeMs: number; slideMs: number };
  /** cron-expr: the seconds the expression fires at (every minute, every hour). */
  cronSeconds?: number[];
  timeZone?: string;
  /** Event time: some messages carry no event time (they belong in the DLQ). */
  badEventTime: boolean;
  /** Gate: how the budget is written, the budget per partition, and how young a message is denied (ms; 0 = never). */
  gateStyle?: GateStyle;
  budget?: number;
  denyYoungerMs?: number;
  /** Join: inner or left, and the bound (ms). */
  joinType?: 'inner' | 'left';
  withinMs?: number;
  faults: Fault[];
}

/** Restrictions from the command line; each undefined means "any". */
export interface VariantFilter {
  kinds?: Kind[];
  time?: TimeDomain[];
  onLate?: OnLate[];
  /** Grace periods to draw from (s). */
  grace?: number[];
  gateStyles?: GateStyle[];
  /** [] = no faults. */
  faults?: Fault[];
  badEventTime?: boolean;
}

/** Window lengths the checker uses (small, so a seed takes seconds). */
export const TUMBLING_S = 1;
/** Sliding shapes a seed draws from (s): one whole multiple, the others not (size % slide != 0), fractions included. */
export const SLIDING_SHAPES = [
  { sizeS: 2, slideS: 1 },
  { sizeS: 1.5, slideS: 1 },
  { sizeS: 2, slideS: 0.75 },
  { sizeS: 1, slideS: 0.4 },
  { sizeS: 1.3, slideS: 1.3 },
  { sizeS: 1.7, slideS: 0.5 },
] as const;
export const SESSION_GAP_S = 0.3;

const ZONES = ['UTC', 'Europe/Berlin', 'Asia/Kolkata', 'America/St_Johns', 'Australia/Adelaide'];

/** Fire seconds of a cron-expr window: irregular gaps of 1 to 3 s. */
function cronSecondsOf(rng: Rng): number[] {
  const out: number[] = [];
  for (let s = rng.int(0, 2); s < 60; s += rng.int(1, 3)) out.push(s);
  return out;
}

export function drawVariant(rng: Rng, filter: VariantFilter = {}): Variant {
  const kind = rng.pick(filter.kinds ?? KINDS);
  const time: TimeDomain = kind === 'gate' ? 'processing' : rng.pick(filter.time ?? (['processing', 'event'] as const));
  const faultPool = filter.faults ?? FAULTS;
  const faults = faultPool.filter(() => rng.chance(0.4));
  const v: Variant = {
    kind,
    time,
    graceS: kind === 'gate' ? 0 : rng.pick(filter.grace ?? [0, 0, 0.5, 1]),
    allowedLatenessS: time === 'event' && kind !== 'gate' ? rng.pick([0, 0.5, 1]) : 0,
    onLate: time === 'event' && kind !== 'gate' ? rng.pick(filter.onLate ?? (['drop', 'include', 'sink'] as const)) : 'drop',
    idleFlushMs: rng.pick([20, 50, 100, 200]),
    badEventTime: time === 'event' && kind !== 'gate' ? (filter.badEventTime ?? rng.chance(0.3)) : false,
    faults,
  };
  if (kind === 'sliding') {
    const shape = rng.pick(SLIDING_SHAPES);
    v.sliding = { sizeMs: Math.round(shape.sizeS * 1000), slideMs: Math.round(shape.slideS * 1000) };
  }
  if (kind === 'cron-expr') {
    v.cronSeconds = cronSecondsOf(rng);
    v.timeZone = rng.pick(ZONES);
  }
  if (kind === 'gate') {
    v.gateStyle = rng.pick(filter.gateStyles ?? (['mutate', 'reassign'] as const));
    v.budget = rng.int(0, 30);
    v.denyYoungerMs = rng.pick([0, 0, 300]);
  }
  if (kind === 'join') {
    v.joinType = rng.pick(['inner', 'left'] as const);
    v.withinMs = rng.pick([200, 500, 1000]);
    v.onLate = 'drop';
    v.allowedLatenessS = 0;
    v.badEventTime = false;
  }
  if (filter.time && kind === 'gate' && !filter.time.includes('processing')) throw new Error('--time event excludes the gate');
  return v;
}

/** The cron expression of a cron-expr variant (6 fields, seconds first). */
export function cronExpressionOf(v: Variant): string {
  return `${v.cronSeconds!.join(',')} * * * * *`;
}

/** One line describing a variant, for the report. */
export function describeVariant(v: Variant): string {
  const parts: string[] = [v.kind, v.time];
  if (v.kind === 'cron-expr') parts.push(`'${cronExpressionOf(v)}'@${v.timeZone}`);
  if (v.kind === 'sliding') parts.push(`size=${v.sliding!.sizeMs / 1000}s slide=${v.sliding!.slideMs / 1000}s`);
  if (v.kind === 'gate') parts.push(`${v.gateStyle} budget=${v.budget} denyYounger=${v.denyYoungerMs}ms`);
  else if (v.kind === 'join') parts.push(`${v.joinType} within=${v.withinMs}ms grace=${v.graceS}s`);
  else {
    parts.push(`grace=${v.graceS}s`);
    if (v.time === 'event') parts.push(`lateness=${v.allowedLatenessS}s onLate=${v.onLate}${v.badEventTime ? ' badEventTime' : ''}`);
    parts.push(`idleFlush=${v.idleFlushMs}ms`);
  }
  parts.push(`faults=${v.faults.length ? v.faults.join('+') : 'none'}`);
  return parts.join(' ');
}
