import { createHash } from 'node:crypto';
import type { Json } from './plugins.js';

/** JSON with object keys sorted at every level, so equal structures hash equal. */
export function canonicalJson(value: Json): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k]!)}`).join(',')}}`;
}

/** 64 lowercase hex: SHA-256 of the canonical structure (S5). */
export function configHash(structure: Json): string {
  return createHash('sha256').update(canonicalJson({ v: 1, chain: structure })).digest('hex');
}
