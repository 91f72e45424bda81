import { option, parseOptions, z, type MisplacedOptions } from '@queen-mq/protocol';
import { isSinkPlugin, type SinkPlugin, type WindowOptions, type WindowPlugin } from './plugins.js';
import { chainError } from './chain-error.js';

/** Window options after defaults and checks; durations in ms. */
export interface ResolvedWindowOptions {
  idleFlushMs: number;
  gracePeriodMs: number;
  allowedLatenessMs: number;
  /** Seconds as given, for the config hash. */
  allowedLateness: number;
  /** `'sink'`: late events go to `lateSink` as late records. */
  onLate: 'drop' | 'include' | 'sink';
  lateSink?: SinkPlugin;
  /** Event-time idleness (ms), when opted in. */
  idleTimeoutMs?: number;
  eventTime?: (value: any) => unknown;
}

const nonNegative = (description: string, unit: string, fallback: string) =>
  option(z.number().min(0).optional(), { description, rule: 'must be a non-negative number', type: `number (${unit})`, default: fallback });

/**
 * The options every window takes (`.window(plugin, options)`), as one schema:
 * it validates them and renders their docs table. A window package extends it
 * with its own (`windowOptionsSchema.extend({ seconds })`).
 */
export const windowOptionsSchema = z.object({
  idleFlushMs: nonNegative(
    'How often the runner closes ripe windows of quiet partitions; 0 disables the timer (a window then closes only when the next message of its partition arrives)',
    'ms',
    "the plugin's `defaultIdleFlushMs` (5000 tumbling and sliding, 1000 session, 30000 cron)",
  ),
  gracePeriod: nonNegative(
    'How long a window stays open after its end: it still takes out-of-order values, and closes (emits) when `windowEnd + gracePeriod <= clock` (strictly past, for a session); see the core README, "Grace and lateness"',
    's',
    '0',
  ),
  allowedLateness: nonNegative('Event time only: watermark = max event time − allowedLateness (so a window closes when the max event time reaches `windowEnd + gracePeriod + allowedLateness`)', 's', '0'),
  onLate: option(z.union([z.enum(['drop', 'include']), z.custom<SinkPlugin>(isSinkPlugin)]).optional(), {
    description:
      'A value whose window was already emitted (event time: `windowEnd + gracePeriod` at or before the watermark from before its batch; processing time: read after its window was closed) is dropped (counted in `lateEventsTotal`), emitted at once as a window of its own, or pushed to a sink as a late record in the same cycle transaction (counted too; see the core README, "Late events to a sink")',
    rule: 'must be "drop", "include" or a sink plugin (e.g. queueSink(queue), or a queue handle with the queen-mq builder)',
    type: '"drop" \\| "include" \\| sink plugin',
    default: '"drop"',
  }),
  idleTimeoutMs: option(z.number().positive().optional(), {
    description:
      "Event time only, opt-in: once a partition has had no message for this long (broker clock), its watermark advances with the broker's clock, so its windows close (see the core README, \"Event-time idleness\"); needs idleFlushMs > 0",
    rule: 'must be a positive number',
    type: 'number (ms)',
    default: '— (off: a quiet partition keeps its windows open)',
  }),
  eventTime: option(z.custom<(value: any) => unknown>((v) => typeof v === 'function').optional(), {
    description: "Event-time extractor (Date, epoch ms or ISO string); without it windows bucket on the broker's createdAt",
    rule: 'must be a function',
    type: '(value) => Date \\| number \\| string',
  }),
});

/**
 * The plugin's own option names (the keys of its `shape`), for
 * `.window(tumbling({ seconds: 60 }), { seconds: 60 })`: such an option is
 * the factory's, and the error says so.
 */
function pluginOptionsOf(plugin: WindowPlugin): MisplacedOptions {
  const shape = plugin.shape;
  if (!shape || typeof shape !== 'object' || Array.isArray(shape)) return {};
  return Object.fromEntries(Object.keys(shape).map((name) => [name, `an option of the ${plugin.kind} plugin, not of .window(): pass it to the plugin's factory`]));
}

/** Core's window option checks (S3, S4 defaults); an unknown option throws. The plugin checks its own. */
export function resolveWindowOptions(plugin: WindowPlugin, options: WindowOptions | undefined): ResolvedWindowOptions {
  const where = `the ${plugin.kind} window`;
  const o = parseOptions(where, windowOptionsSchema, options, pluginOptionsOf(plugin));
  const allowedLateness = o.allowedLateness ?? 0;
  const idleFlushMs = o.idleFlushMs ?? plugin.defaultIdleFlushMs;
  if (o.idleTimeoutMs !== undefined) {
    // Idleness moves a watermark, which only event time has; and only the flush timer closes a quiet partition's windows.
    if (!o.eventTime) throw chainError(`${where}: idleTimeoutMs is for event-time windows: pass eventTime too`);
    if (idleFlushMs <= 0) throw chainError(`${where}: idleTimeoutMs needs the idle-flush timer (idleFlushMs > 0), which advances a quiet partition's watermark`);
  }
  const lateSink = typeof o.onLate === 'object' ? o.onLate : undefined;
  return {
    idleFlushMs,
    gracePeriodMs: Math.round((o.gracePeriod ?? 0) * 1000),
    allowedLatenessMs: Math.round(allowedLateness * 1000),
    allowedLateness,
    onLate: lateSink ? 'sink' : ((o.onLate as 'drop' | 'include' | undefined) ?? 'drop'),
    ...(lateSink ? { lateSink } : {}),
    ...(o.idleTimeoutMs !== undefined ? { idleTimeoutMs: o.idleTimeoutMs } : {}),
    eventTime: o.eventTime,
  };
}
