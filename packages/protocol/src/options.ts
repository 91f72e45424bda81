import { z } from 'zod';
import { QueenError } from './errors.js';

// Options objects of the SDK (window builders, the gate, sinks, run(), the
// client and its consumer): one zod object per option object. The same
// schema validates at the call that takes the options and renders the
// options table of the docs, so the two cannot drift.

/** The zod the option schemas are written with (the protocol's own copy, so there is one). */
export { z };

/** What an option states besides its type: the docs text, and the rule a bad value breaks. */
export interface OptionMeta {
  /** One line for the options table. */
  description: string;
  /** The rule as the error says it, e.g. `must be a positive integer`. Default: zod's own message. */
  rule?: string;
  /** The default as the table shows it, e.g. `5000`. */
  default?: string;
  /** The type as the table shows it, when zod's is not clear (e.g. `(value) => Date | number | string`). */
  type?: string;
}

/** A schema of one option object: a zod object whose fields carry {@link OptionMeta} (`.meta()`). */
export type OptionsSchema = z.ZodObject<z.ZodRawShape>;

/** Attaches the docs text and the error rule to one option's schema. */
export function option<T extends z.ZodType>(schema: T, meta: OptionMeta): T {
  return schema.meta(meta as unknown as Record<string, unknown>) as T;
}

function metaOf(schema: z.ZodType | undefined): Partial<OptionMeta> {
  return ((schema?.meta() as Partial<OptionMeta> | undefined) ?? {}) as Partial<OptionMeta>;
}

function show(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The accepted option nearest to a misspelt one (same letters ignoring case, or one edit away). */
function nearest(name: string, accepted: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const exact = accepted.find((a) => a.toLowerCase() === lower);
  if (exact) return exact;
  const distance = (a: string, b: string): number => {
    const row = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0]!;
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const cur = row[j]!;
        row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return row[b.length]!;
  };
  return accepted.find((a) => distance(a.toLowerCase(), lower) <= 2);
}

/**
 * Options another call takes, by name, each with where it goes as the error
 * says it (`'an option of .window(plugin, options), not of the plugin'`).
 */
export type MisplacedOptions = Readonly<Record<string, string>>;

/**
 * Validates an options object against its schema at the call that takes it.
 * An unknown option (a misspelling is the usual one) or a value breaking its
 * rule throws QueenError VALIDATION_FAILED — the code chain errors use —
 * naming the option and, for an unknown one, the accepted ones:
 * `tumbling window: unknown option "idleFlushMS" (did you mean "idleFlushMs"?); accepted: seconds, idleFlushMs, …`.
 * `misplaced` names the options of a neighbouring call (a window factory's
 * versus `.window()`'s): one given here, or a misspelling of one, throws
 * saying where it goes instead of being taken for a stranger.
 * `undefined`/absent options mean `{}`. Answers the parsed object (zod defaults applied).
 */
export function parseOptions<S extends OptionsSchema>(where: string, schema: S, value: unknown, misplaced: MisplacedOptions = {}): z.output<S> {
  const input = value === undefined || value === null ? {} : value;
  if (typeof input !== 'object' || Array.isArray(input)) {
    throw new QueenError('VALIDATION_FAILED', `${where}: options must be an object, got ${show(value)}`);
  }
  const accepted = Object.keys(schema.shape);
  const elsewhere = Object.keys(misplaced).filter((name) => !accepted.includes(name));
  for (const key of Object.keys(input)) {
    if (accepted.includes(key)) continue;
    const details = [{ field: key, message: `unknown option; accepted: ${accepted.join(', ')}` }];
    if (elsewhere.includes(key)) {
      throw new QueenError('VALIDATION_FAILED', `${where}: "${key}" is ${misplaced[key]}; accepted here: ${accepted.join(', ')}`, {
        details: [{ field: key, message: `${misplaced[key]}; accepted here: ${accepted.join(', ')}` }],
      });
    }
    const guess = nearest(key, accepted) ?? nearest(key, elsewhere);
    const hint = guess === undefined ? '' : accepted.includes(guess) ? ` (did you mean "${guess}"?)` : ` (did you mean "${guess}"? it is ${misplaced[guess]})`;
    throw new QueenError('VALIDATION_FAILED', `${where}: unknown option "${key}"${hint}; accepted: ${accepted.join(', ')}`, { details });
  }
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const name = String(issue.path[0] ?? '');
  const rule = metaOf(schema.shape[name] as z.ZodType | undefined).rule ?? issue.message;
  const given = (input as Record<string, unknown>)[name];
  throw new QueenError('VALIDATION_FAILED', `${where}: ${name} ${rule}, got ${show(given)}`, { details: [{ field: name, message: rule }] });
}

/** One row of an options table. */
export interface OptionRow {
  name: string;
  type: string;
  required: boolean;
  default?: string;
  description: string;
}

function typeText(schema: z.ZodType): string {
  const def = (schema as unknown as { _zod: { def: Record<string, any> } })._zod.def;
  switch (def.type) {
    case 'optional':
    case 'default':
    case 'nullable':
    case 'readonly':
      return typeText(def.innerType);
    case 'enum':
      return Object.values(def.entries as Record<string, string>).map((v) => JSON.stringify(v)).join(' \\| ');
    case 'literal':
      return (def.values as unknown[]).map((v) => JSON.stringify(v)).join(' \\| ');
    case 'union':
      return (def.options as z.ZodType[]).map(typeText).join(' \\| ');
    case 'int':
      return 'integer';
    case 'custom':
      return 'object';
    default:
      return String(def.type);
  }
}

/** The rows of an options table, in the schema's order. */
export function optionRows(schema: OptionsSchema): OptionRow[] {
  return Object.entries(schema.shape).map(([name, field]) => {
    const f = field as z.ZodType;
    const meta = metaOf(f);
    return {
      name,
      type: meta.type ?? typeText(f),
      required: !f.safeParse(undefined).success,
      ...(meta.default !== undefined ? { default: meta.default } : {}),
      description: meta.description ?? '',
    };
  });
}

/** The options table as Markdown (`| Option | Type | Default | Description |`), for READMEs and docs. */
export function optionsMarkdown(schema: OptionsSchema): string {
  const lines = ['| Option | Type | Default | Description |', '| --- | --- | --- | --- |'];
  for (const r of optionRows(schema)) {
    lines.push(`| \`${r.name}\`${r.required ? ' (required)' : ''} | ${r.type} | ${r.default ?? '—'} | ${r.description.replace(/\|/g, '\\|')} |`);
  }
  return lines.join('\n');
}
