import type { z } from 'zod';
import type { FieldIssue } from './errors.js';

/** `['items', 2, 'queue']` under `body` → `body.items[2].queue`. */
export function fieldPath(prefix: string, path: ReadonlyArray<PropertyKey>): string {
  let out = prefix;
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : `.${String(part)}`;
  return out;
}

export function issuesToDetails(prefix: string, error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({ field: fieldPath(prefix, issue.path), message: issue.message }));
}
