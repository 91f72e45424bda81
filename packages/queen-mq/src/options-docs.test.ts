import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { joinOptionsSchema, optionsMarkdown, runOptionsSchema, windowOptionsSchema, type OptionsSchema } from '@queen-mq/core';
import { consumeOptionsSchema, queenOptionsSchema } from '@queen-mq/client';
import { tumblingOptionsSchema } from '@queen-mq/window-tumbling';
import { slidingOptionsSchema } from '@queen-mq/window-sliding';
import { sessionOptionsSchema } from '@queen-mq/window-session';
import { cronOptionsSchema } from '@queen-mq/window-cron';
import { queueSinkOptionsSchema } from '@queen-mq/sinks';
import { slidingWindowLimitOptionsSchema, tokenBucketOptionsSchema } from '@queen-mq/gate';

// The options tables of the package READMEs are rendered from the same
// schemas that validate the options, between `<!-- options:NAME -->` and
// `<!-- /options -->`. This test fails when one drifts; regenerate with
// QUEEN_UPDATE_OPTIONS_DOCS=1 npx vitest run packages/queen-mq/src/options-docs.test.ts

const packages = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const tables: [readme: string, name: string, schema: OptionsSchema][] = [
  ['core/README.md', 'windowOptionsSchema', windowOptionsSchema],
  ['core/README.md', 'runOptionsSchema', runOptionsSchema],
  ['core/README.md', 'joinOptionsSchema', joinOptionsSchema],
  ['client/README.md', 'queenOptionsSchema', queenOptionsSchema],
  ['client/README.md', 'consumeOptionsSchema', consumeOptionsSchema],
  ['windows/tumbling/README.md', 'tumblingOptionsSchema', tumblingOptionsSchema],
  ['windows/sliding/README.md', 'slidingOptionsSchema', slidingOptionsSchema],
  ['windows/session/README.md', 'sessionOptionsSchema', sessionOptionsSchema],
  ['windows/cron/README.md', 'cronOptionsSchema', cronOptionsSchema],
  ['sinks/README.md', 'queueSinkOptionsSchema', queueSinkOptionsSchema],
  ['gate/README.md', 'tokenBucketOptionsSchema', tokenBucketOptionsSchema],
  ['gate/README.md', 'slidingWindowLimitOptionsSchema', slidingWindowLimitOptionsSchema],
];

function section(name: string): RegExp {
  return new RegExp(`(<!-- options:${name} -->\\n)([\\s\\S]*?)(\\n<!-- /options -->)`);
}

describe('README options tables', () => {
  it.each(tables)('%s renders %s from the schema', (readme, name, schema) => {
    const file = join(packages, readme);
    const text = readFileSync(file, 'utf8');
    const match = section(name).exec(text);
    expect(match, `${readme} has no <!-- options:${name} --> section`).not.toBeNull();
    const table = optionsMarkdown(schema);
    if (process.env.QUEEN_UPDATE_OPTIONS_DOCS === '1' && match![2] !== table) {
      writeFileSync(file, text.replace(section(name), (_, open: string, _old: string, close: string) => open + table + close));
      return;
    }
    expect(match![2]).toBe(table);
  });
});
