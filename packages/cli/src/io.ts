/**
 * Everything a command touches outside itself, so `main(argv, io)` runs the
 * same in a test (string buffers, an AbortController) as in a terminal.
 */
export interface CliIO {
  stdout: { write(chunk: string): unknown; isTTY?: boolean };
  stderr: { write(chunk: string): unknown; isTTY?: boolean };
  /** Lines for `queen push` when no JSON argument is given. */
  stdin?: AsyncIterable<string | Buffer> & { isTTY?: boolean };
  env: Record<string, string | undefined>;
  /** Ends the long-running commands (`dev`, `tail`); the process wires SIGINT/SIGTERM to it. */
  signal?: AbortSignal;
}

/**
 * The real process: stdio, environment, and SIGINT/SIGTERM as the stop
 * signal. A second signal exits at once (128 + signal number).
 */
export function processIO(): CliIO {
  const stop = new AbortController();
  // `on`, not `once`: the broker's embedded-PostgreSQL signal handler stops
  // the server and exits by itself when it is the signal's only listener. A
  // `once` listener is removed before it runs, so `queen dev` would lose its
  // database mid-drain and exit 130 instead of closing the broker first.
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) process.exit(signal === 'SIGINT' ? 130 : 143);
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env, signal: stop.signal };
}

/** Splits a byte/string stream into lines (the last one may lack a newline). */
export async function* lines(input: AsyncIterable<string | Buffer>): AsyncGenerator<string> {
  let rest = '';
  for await (const chunk of input) {
    rest += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      yield rest.slice(0, nl).replace(/\r$/, '');
      rest = rest.slice(nl + 1);
    }
  }
  if (rest) yield rest;
}

/** Resolves when the signal aborts (never, without one). */
export function untilAborted(signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (!signal) return;
    if (signal.aborted) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
