import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { errorCatalogue } from './errors.js';
import { protocolReference } from './reference.js';
import { allRoutes } from './routes.js';

// docs/protocol.md carries the route and error reference generated from this
// package; a route or code added without regenerating it fails here.
const doc = readFileSync(fileURLToPath(new URL('../../../docs/protocol.md', import.meta.url)), 'utf8');
const generated = doc.slice(doc.indexOf('-->', doc.indexOf('<!-- generated:start')) + 4, doc.indexOf('<!-- generated:end -->'));

describe('docs/protocol.md', () => {
  it('holds the reference of the current route table and error catalogue (regenerate: node scripts/protocol-doc.mjs)', () => {
    expect(generated).toBe(protocolReference(allRoutes, errorCatalogue));
  });

  it('documents every route and every error code', () => {
    for (const r of Object.values(allRoutes)) expect(doc).toContain(`### ${r.method} \`${r.url}\``);
    for (const code of Object.keys(errorCatalogue)) expect(doc).toContain(`| \`${code}\` |`);
  });
});
