import { createHash } from 'node:crypto';
import type { WindowPlugin } from './plugins.js';
import { chainError } from './chain-error.js';
import { canonicalJson } from './config-hash.js';
import { SEP } from './keys.js';

/**
 * Which window (kind + shape) each tag in use in this process stands for.
 * A tag names state rows, so two different windows sharing one would read
 * each other's rows; it is process-wide because tags are global names.
 */
const tagOwners = new Map<string, string>();

/**
 * The state-row tag of a window: the plugin's own `tag`, or one derived from
 * its kind and shape (`<kind>:<16 hex of sha256(shape)>`). Throws
 * VALIDATION_FAILED for a tag with U+001F or a leading `__`, and when another
 * kind or shape already uses the tag.
 */
export function windowTag(plugin: WindowPlugin): string {
  const identity = canonicalJson({ kind: plugin.kind, shape: plugin.shape ?? null });
  const tag = plugin.tag ?? `${plugin.kind}:${createHash('sha256').update(identity).digest('hex').slice(0, 16)}`;
  if (typeof tag !== 'string' || tag === '' || tag.includes(SEP) || tag.startsWith('__')) {
    throw chainError(`window plugin "${plugin.kind}": tag must be a non-empty string without U+001F that does not start with "__", got ${JSON.stringify(tag)}`);
  }
  const owner = tagOwners.get(tag);
  if (owner === undefined) tagOwners.set(tag, identity);
  else if (owner !== identity) {
    throw chainError(`window plugin "${plugin.kind}": tag ${JSON.stringify(tag)} is already used by another window (${owner}); give each kind and shape its own tag, or omit tag to derive one`);
  }
  return tag;
}
