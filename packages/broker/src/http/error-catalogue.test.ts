import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { errorCatalogue, errorMessage, isErrorCode, QueenError } from '@queen-mq/protocol';

// The catalogue in @queen-mq/protocol is the one source of codes, statuses
// and texts: the generated reference documents every code, and every code
// the SQL (migrations and function files) answers or raises is one of them.

const root = fileURLToPath(new URL('../../../..', import.meta.url));
const sqlDirs = ['packages/broker/migrations', 'packages/kv/migrations', 'packages/broker/src/sql', 'packages/kv/src/sql'];

/** Catalogue-shaped codes quoted anywhere in the SQL: 'CODE' in SQL, "CODE" inside JSON literals. */
function sqlCodes(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const dir of sqlDirs) {
    for (const name of readdirSync(join(root, dir)).filter((f) => f.endsWith('.sql'))) {
      const text = readFileSync(join(root, dir, name), 'utf8');
      for (const m of text.matchAll(/['"]([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)['"]/g)) {
        const where = found.get(m[1]!) ?? [];
        where.push(`${dir}/${name}`);
        found.set(m[1]!, where);
      }
    }
  }
  return found;
}

describe('the error catalogue', () => {
  it('documents every code in docs/protocol.md (the generated reference)', () => {
    const doc = readFileSync(join(root, 'docs', 'protocol.md'), 'utf8');
    const undocumented = Object.keys(errorCatalogue).filter((code) => !doc.includes(`| \`${code}\` |`));
    expect(undocumented).toEqual([]);
  });

  it('holds every code the SQL answers or raises', () => {
    const codes = sqlCodes();
    // The scan sees the codes we know SQL answers: it cannot pass by finding nothing.
    expect([...codes.keys()]).toEqual(expect.arrayContaining(['LEASE_EXPIRED', 'VERSION_CONFLICT', 'ACK_COUNT_MISMATCH', 'KV_MAX_EXCEEDED', 'ACK_BLOCKED']));
    const unknown = [...codes].filter(([code]) => !isErrorCode(code)).map(([code, where]) => `${code} (${[...new Set(where)].join(', ')})`);
    expect(unknown).toEqual([]);
  });

  it('words a failure from the catalogue, its detail only when every parameter is known', () => {
    expect(errorMessage('VERSION_CONFLICT', { key: 'ns/k', expected: 3, currentVersion: 5 })).toBe('Version conflict on ns/k (expected version 3, current 5)');
    expect(errorMessage('VERSION_CONFLICT', { key: 'ns/k' })).toBe('Version conflict');
    expect(errorMessage('LEASE_EXPIRED', { key: 'ignored' })).toBe('Invalid or expired lease');
    expect(new QueenError('KV_MAX_EXCEEDED', undefined, { params: { key: 'n/k', max: 10 } }).message).toBe('Increment would exceed max 10 of n/k');
    expect(new QueenError('KV_MAX_EXCEEDED').message).toBe('Increment would exceed max');
    // Every placeholder of a detail is a plain name, so a raiser can fill it.
    for (const [code, entry] of Object.entries(errorCatalogue) as [string, { detail?: string }][]) {
      if (entry.detail) expect(entry.detail, code).toMatch(/^[^{}]*(\{\w+\}[^{}]*)+$/);
    }
  });
});
