import { describe, expect, it } from 'vitest';
import { QueenError } from './errors.js';
import { option, optionRows, optionsMarkdown, parseOptions, z } from './options.js';

const schema = z.object({
  seconds: option(z.number().int().positive(), { description: 'Window length', rule: 'must be a positive integer', type: 'integer (s)' }),
  idleFlushMs: option(z.number().min(0).optional(), { description: 'Flush interval', rule: 'must be a non-negative number', default: '5000' }),
  onLate: option(z.enum(['drop', 'include']).optional(), { description: 'Late events', default: '"drop"' }),
});

function thrown(f: () => unknown): QueenError {
  try {
    f();
  } catch (err) {
    return err as QueenError;
  }
  throw new Error('did not throw');
}

describe('option schemas', () => {
  it('an unknown option throws VALIDATION_FAILED naming it, the nearest accepted one and all accepted ones', () => {
    const err = thrown(() => parseOptions('tumbling window', schema, { seconds: 60, idleFlushMS: 1000 }));
    expect(err).toBeInstanceOf(QueenError);
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toBe('tumbling window: unknown option "idleFlushMS" (did you mean "idleFlushMs"?); accepted: seconds, idleFlushMs, onLate');
    expect(err.details).toEqual([{ field: 'idleFlushMS', message: 'unknown option; accepted: seconds, idleFlushMs, onLate' }]);
    expect(thrown(() => parseOptions('w', schema, { seconds: 1, onlate: 'drop' })).message).toMatch(/did you mean "onLate"/);
    expect(thrown(() => parseOptions('w', schema, { seconds: 1, colour: 1 })).message).toBe('w: unknown option "colour"; accepted: seconds, idleFlushMs, onLate');
  });

  it('an option of a neighbouring call, or a misspelling of one, throws saying where it goes', () => {
    const own = z.object({ seconds: schema.shape.seconds });
    const misplaced = { idleFlushMs: 'an option of .window(plugin, options), not of the plugin' };
    const err = thrown(() => parseOptions('tumbling window', own, { seconds: 60, idleFlushMs: 1000 }, misplaced));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toBe('tumbling window: "idleFlushMs" is an option of .window(plugin, options), not of the plugin; accepted here: seconds');
    expect(err.details).toEqual([{ field: 'idleFlushMs', message: 'an option of .window(plugin, options), not of the plugin; accepted here: seconds' }]);
    expect(thrown(() => parseOptions('tumbling window', own, { seconds: 60, idleFlushMS: 1000 }, misplaced)).message).toBe(
      'tumbling window: unknown option "idleFlushMS" (did you mean "idleFlushMs"? it is an option of .window(plugin, options), not of the plugin); accepted: seconds',
    );
    // an accepted name wins over a misplaced one, as a guess and as a name
    expect(thrown(() => parseOptions('w', own, { second: 1 }, { seconds: 'elsewhere' })).message).toBe('w: unknown option "second" (did you mean "seconds"?); accepted: seconds');
    expect(parseOptions('w', own, { seconds: 1 }, { seconds: 'elsewhere' })).toEqual({ seconds: 1 });
  });

  it('a mistyped value throws with the rule and the value given; a missing required option too', () => {
    expect(thrown(() => parseOptions('w', schema, { seconds: '60' })).message).toBe('w: seconds must be a positive integer, got "60"');
    expect(thrown(() => parseOptions('w', schema, { seconds: 1, idleFlushMs: -1 })).message).toBe('w: idleFlushMs must be a non-negative number, got -1');
    expect(thrown(() => parseOptions('w', schema, {})).message).toBe('w: seconds must be a positive integer, got undefined');
    expect(thrown(() => parseOptions('w', schema, 'sixty')).message).toBe('w: options must be an object, got "sixty"');
    // no rule: zod's message
    expect(thrown(() => parseOptions('w', schema, { seconds: 1, onLate: 'keep' })).message).toMatch(/^w: onLate .+, got "keep"$/);
  });

  it('valid options parse; undefined values count as absent', () => {
    expect(parseOptions('w', schema, { seconds: 60, idleFlushMs: undefined })).toEqual({ seconds: 60, idleFlushMs: undefined });
  });

  it('the same schema renders the options table', () => {
    expect(optionRows(schema)).toEqual([
      { name: 'seconds', type: 'integer (s)', required: true, description: 'Window length' },
      { name: 'idleFlushMs', type: 'number', required: false, default: '5000', description: 'Flush interval' },
      { name: 'onLate', type: '"drop" \\| "include"', required: false, default: '"drop"', description: 'Late events' },
    ]);
    expect(optionsMarkdown(schema).split('\n')).toEqual([
      '| Option | Type | Default | Description |',
      '| --- | --- | --- | --- |',
      '| `seconds` (required) | integer (s) | — | Window length |',
      '| `idleFlushMs` | number | 5000 | Flush interval |',
      '| `onLate` | "drop" \\| "include" | "drop" | Late events |',
    ]);
  });
});
