import { parseOptions, type MisplacedOptions, type OptionsSchema, type z } from '@queen-mq/protocol';
import type { WindowOptions } from './plugins.js';
import { windowOptionsSchema } from './window-options.js';

// A window's options come in two halves, each taken by one call: the
// plugin's own (`tumbling({ seconds })`: they shape the windows) and the
// options every window shares (`.window(plugin, { idleFlushMs, … })`: how
// core runs them). A factory that accepted `idleFlushMs` would build its
// plugin and drop it — `.window(tumbling({ seconds, idleFlushMs }))` flushed
// at the default — so each call refuses the other's options, saying where
// they go. The sugar (`.windowTumbling({ seconds, idleFlushMs })`) takes both
// and splits them. (`.window()`'s side: resolveWindowOptions.)

const windowOptionNames = Object.keys(windowOptionsSchema.shape);

const goesToWindowCall: MisplacedOptions = Object.fromEntries(
  windowOptionNames.map((name) => [name, `an option of the window call, not of the plugin: .window(plugin, { ${name} })`]),
);

/**
 * Validates what a window plugin's factory takes (`tumbling({ seconds })`)
 * against the schema of its own options. An unknown or mistyped option throws
 * VALIDATION_FAILED like {@link parseOptions}; so does a common window option
 * (`idleFlushMs`, `gracePeriod`, …) or a misspelling of one, saying it goes to
 * `.window(plugin, { … })`. A third-party factory uses it the same way.
 */
export function parseWindowPluginOptions<S extends OptionsSchema>(where: string, schema: S, options: unknown): z.output<S> {
  return parseOptions(where, schema, options, goesToWindowCall);
}

/** `O` without the common window options: what the plugin's factory takes (each member of a union on its own). */
type OwnWindowOptions<O> = O extends unknown ? Omit<O, keyof WindowOptions> : never;

/**
 * Splits a sugar's options (`.windowTumbling({ seconds, idleFlushMs })`) into
 * the plugin's half, for its factory, and the common half, for `.window()`,
 * after checking them whole against `schema` (the plugin's own options plus
 * the common ones), so a misspelling is matched against every accepted name.
 */
export function splitWindowOptions<O extends WindowOptions<any>>(where: string, schema: OptionsSchema, options: O): { plugin: OwnWindowOptions<O>; window: WindowOptions<O extends WindowOptions<infer T> ? T : any> } {
  parseOptions(where, schema, options);
  const plugin: Record<string, unknown> = {};
  const window: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options ?? {})) {
    if (value === undefined) continue;
    (windowOptionNames.includes(name) ? window : plugin)[name] = value;
  }
  return { plugin: plugin as OwnWindowOptions<O>, window };
}
