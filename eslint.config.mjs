// The linter (issue 30): a small rule set that pays here, run by npm test
// (tools/lint.test.ts) and CI. Type-aware rules need each package's
// tsconfig, which covers its sources, not its tests.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '.nx/**', '.queen/**', 'packages/console/src/ui/**/*.js', 'bench/results/**'] },
  {
    files: ['**/*.ts', '**/*.mts'],
    languageOptions: { parser: tseslint.parser },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      // Unused locals, parameters and imports are dead code or a missed call; `_name` says "unused on purpose".
      '@typescript-eslint/no-unused-vars': ['error', { args: 'after-used', argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      // Types are imported as types (verbatimModuleSyntax needs it too; this keeps the spelling one: `import type` / `type X`).
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
    },
  },
  {
    // A promise nobody awaits loses its rejection (an unhandled rejection ends the process) and its ordering.
    files: ['packages/*/src/**/*.ts', 'packages/windows/*/src/**/*.ts', 'apps/*/src/**/*.ts'],
    // The console's browser half has a tsconfig of its own (tsconfig.ui.json) that the project service does not find.
    ignores: ['**/*.test.ts', 'packages/console/src/ui/**'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: { '@typescript-eslint/no-floating-promises': 'error' },
  },
);
