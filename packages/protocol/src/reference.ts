import { z } from 'zod';
import type { RouteSpec } from './routes.js';

/**
 * The route and error reference of docs/protocol.md, rendered from the same
 * route table and catalogue the broker validates with and the client calls,
 * so the document cannot drift from the code (a test regenerates it and
 * compares). Plain Markdown, one section per route.
 */
export function protocolReference(routeTable: Record<string, RouteSpec>, catalogue: Record<string, { status: number; message: string; detail?: string }>): string {
  const out: string[] = [];
  const sorted = Object.entries(routeTable).sort(([, a], [, b]) => a.url.localeCompare(b.url) || a.method.localeCompare(b.method));
  out.push('| Method | Path | Access | What it does |', '|---|---|---|---|');
  for (const [, r] of sorted) out.push(`| ${r.method} | \`${r.url}\` | ${r.level} | ${r.summary} |`);
  for (const [id, r] of sorted) {
    out.push('', `### ${r.method} \`${r.url}\``, '', `${r.summary}. Access: ${r.level}. Success: ${r.successStatus ?? 200}. Operation id: \`${id}\`.`);
    for (const [where, schema] of [['Path parameters', r.params], ['Query string', r.query], ['Body', r.body]] as const) {
      if (!schema) continue;
      const lines = fields(toJson(schema), '');
      if (lines.length) out.push('', `${where}:`, '', ...lines);
    }
  }
  out.push('', '## Error codes', '', 'Every failure answers `{error, code, details?}`; clients branch on `code`. Item-level codes appear inside a 200 answer as `success:false, code` on the item.', '');
  out.push('| Code | HTTP status | Meaning |', '|---|---|---|');
  for (const [code, e] of Object.entries(catalogue)) {
    // With its detail template: what the broker answers when it knows every {name} (else the message alone).
    const text = e.detail ? `${e.message} ${e.detail}` : e.message;
    out.push(`| \`${code}\` | ${e.status === 0 ? 'item-level' : e.status} | ${text.replace(/\|/g, '\\|')} |`);
  }
  return `${out.join('\n')}\n`;
}

type Json = Record<string, any>;

function toJson(schema: z.ZodType): Json {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json;
}

/** One bullet per property, nested one level into arrays of objects and objects. */
function fields(js: Json, prefix: string, depth = 0): string[] {
  const props: Record<string, Json> = js.properties ?? {};
  const required = new Set<string>(js.required ?? []);
  const out: string[] = [];
  for (const [name, p] of Object.entries(props)) {
    const path = `${prefix}${name}`;
    out.push(`${'  '.repeat(depth)}- \`${path}\`: ${describe(p)}${required.has(name) && p.default === undefined ? ', required' : ''}`);
    if (depth < 2) {
      const inner = p.type === 'array' ? p.items : p.type === 'object' ? p : undefined;
      if (inner?.properties) out.push(...fields(inner, `${path}${p.type === 'array' ? '[].' : '.'}`, depth + 1));
    }
  }
  return out;
}

function describe(p: Json): string {
  if (p.anyOf) return p.anyOf.map(describe).join(' or ');
  if (p.const !== undefined) return `\`${JSON.stringify(p.const)}\``;
  if (p.enum) return `one of ${p.enum.map((v: unknown) => `\`${JSON.stringify(v)}\``).join(', ')}${p.default !== undefined ? `, default \`${JSON.stringify(p.default)}\`` : ''}`;
  const parts: string[] = [];
  if (typeof p.pattern === 'string' && p.pattern.includes('[0-9a-fA-F]{8}-')) parts.push('UUID');
  else if (p.format === 'date-time') parts.push('ISO-8601 time');
  else if (p.type === 'array') parts.push(`array of ${p.items ? describe(p.items) : 'any'}`);
  else parts.push(p.type ?? 'any JSON');
  if (p.type === 'string' && (p.minLength !== undefined || p.maxLength !== undefined) && !parts.includes('UUID')) parts.push(`${p.minLength ?? 0}–${p.maxLength ?? '∞'} chars`);
  if ((p.type === 'integer' || p.type === 'number') && (p.minimum !== undefined || p.maximum !== undefined)) parts.push(`${p.minimum ?? '−∞'}–${p.maximum ?? '∞'}`);
  if (p.type === 'array' && p.maxItems !== undefined) parts.push(`at most ${p.maxItems}`);
  if (p.default !== undefined) parts.push(`default \`${JSON.stringify(p.default)}\``);
  return parts.join(', ');
}
