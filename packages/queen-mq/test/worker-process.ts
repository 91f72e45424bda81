import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

// Runners in their own processes, for the tests that SIGKILL them: a worker
// script of this folder runs from the workspace sources (no dist needed).

const testDir = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(testDir, '..', '..', '..');
const running = new Set<ChildProcess>();

/** Starts `test/<script>` with `vars` added to the environment; stdout and stderr are piped. */
export function spawnWorker(script: string, vars: Record<string, string>): ChildProcess {
  // node itself with tsx as a loader (not the tsx CLI, which forks a second
  // process that a SIGKILL of the first would leave running).
  const child = spawn(process.execPath, ['--import', 'tsx', join(testDir, script)], {
    cwd: repoRoot,
    env: { ...process.env, ...vars, TSX_TSCONFIG_PATH: join(testDir, 'tsconfig.json') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.on('exit', () => running.delete(child));
  return child;
}

/** SIGKILL, resolved once the process is gone. */
export function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

/** Every worker still running, SIGKILLed (a test file's afterAll). */
export function killAllWorkers(): void {
  for (const c of running) c.kill('SIGKILL');
}
