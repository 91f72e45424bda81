import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { EXIT } from './exit.js';
import type { CliIO } from './io.js';
import { WORKER_PARENT, WORKER_ROOT_FILES, workerFiles, workerNextSteps } from './new-worker.js';
import { UsageError } from './usage.js';

interface NewArgs {
  /** What to create; `worker` is the one kind. */
  kind: string;
  name: string;
  /** The repository root; default the current directory. */
  root?: string;
}

/**
 * `queen new worker <name>`: scaffolds `apps/<name>` in this repository (the
 * same files as `npx nx g ./tools/nx-plugin:worker <name>`). Refuses, exit
 * 4, when the folder exists; exit 2 outside the repository root.
 */
export async function newCommand(io: CliIO, args: NewArgs): Promise<number> {
  if (args.kind !== 'worker') throw new UsageError(`new: unknown kind "${args.kind}" (there is one: worker)`);
  const files = workerFiles(args.name);
  const root = resolve(args.root ?? process.cwd());
  const missing = WORKER_ROOT_FILES.filter((f) => !existsSync(join(root, f)));
  if (missing.length) {
    throw new UsageError(`${root} is not the repository root (no ${missing.join(', ')}): run it there, or pass --root`);
  }
  const dir = `${WORKER_PARENT}/${args.name}`;
  if (existsSync(join(root, dir))) {
    io.stderr.write(`queen new worker: ${dir} exists already; nothing written\n`);
    return EXIT.CONFLICT;
  }
  for (const f of files) {
    const path = join(root, f.path);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, f.content, { flag: 'wx' });
    io.stdout.write(`created ${f.path}\n`);
  }
  io.stdout.write(`\n${workerNextSteps(args.name)}`);
  return EXIT.OK;
}
