import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The linter (eslint.config.mjs) as part of npm test: no floating promises
// in sources, no unused locals, parameters or imports, types imported as
// types. `npx eslint .` shows the same (and `--fix` mends the imports).

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

describe('lint', () => {
  it('the repository passes eslint.config.mjs', async () => {
    const results = await new ESLint({ cwd: root }).lintFiles(['.']);
    const problems = results.flatMap((r) => r.messages.map((m) => `${r.filePath.slice(root.length + 1)}:${m.line} ${m.ruleId ?? 'parse'}: ${m.message}`));
    expect(problems).toEqual([]);
    expect(results.length).toBeGreaterThan(300);
  }, 600_000);

  it('sees what it is there for: a floating promise in a source, an unused local', async () => {
    const eslint = new ESLint({ cwd: root });
    // Linted as if it were this source file, so the type-aware rule has its project.
    const [r] = await eslint.lintText('export function f(): void {\n  const unused = 1;\n  Promise.resolve(1);\n}\n', { filePath: join(root, 'packages/broker/src/log/ack.ts') });
    expect(r!.messages.map((m) => m.ruleId).sort()).toEqual(['@typescript-eslint/no-floating-promises', '@typescript-eslint/no-unused-vars']);
  }, 120_000);
});
