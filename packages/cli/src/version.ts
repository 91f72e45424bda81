import { readFileSync } from 'node:fs';

/** The CLI's own version (its package.json, one level above src/ and dist/). */
export const VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
