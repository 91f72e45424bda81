import http from 'node:http';
import https from 'node:https';
import type { Dispatcher } from 'undici';

/** One HTTP exchange: the status and the whole body as text. */
interface Answer {
  status: number;
  text: string;
}

/**
 * Sends one request and reads its answer. Rejects with the signal's reason
 * once `signal` aborts (before or during the body), else with the socket's
 * error (it has a `code`).
 */
type Exchange = (method: string, url: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal) => Promise<Answer>;

/** An {@link Exchange} and how to close its connections. */
export interface HttpPath {
  exchange: Exchange;
  /** Waits for the exchanges in flight, then closes the connections. */
  close(): Promise<void>;
}

/** How long an idle keep-alive socket is kept, ms (undici's default keepAliveTimeout). */
const IDLE_SOCKET_MS = 4000;
/** A connect that takes longer fails with CONNECT_TIMEOUT: the request was never sent (undici's default connectTimeout). */
const CONNECT_TIMEOUT_MS = 10000;

function codedError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * node:http(s) with a keep-alive Agent: the client's own path. Loading undici
 * costs a process ~15 MB (its JS and the llhttp WebAssembly) that a stream
 * runner would carry for a few requests per cycle; node:http's parser is
 * already in the binary. Sockets: unlimited per origin, kept idle
 * {@link IDLE_SOCKET_MS} (less when the server's Keep-Alive hint says so),
 * unref'd while idle.
 */
export function nodeHttpPath(origin: string): HttpPath {
  const secure = origin.startsWith('https:');
  const agent = secure ? new https.Agent({ keepAlive: true, timeout: IDLE_SOCKET_MS }) : new http.Agent({ keepAlive: true, timeout: IDLE_SOCKET_MS });
  const send = secure ? https.request : http.request;
  let inFlight = 0;
  let closing: (() => void) | null = null;
  let closed = false;

  const exchange: Exchange = (method, url, headers, body, signal) =>
    new Promise<Answer>((resolve, reject) => {
      if (closed) return reject(codedError('the client is closed', 'UND_ERR_CLOSED'));
      if (signal.aborted) return reject(signal.reason);
      inFlight++;
      let connectTimer: NodeJS.Timeout | undefined;
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(connectTimer);
        signal.removeEventListener('abort', onAbort);
        if (--inFlight === 0) closing?.();
        fn();
      };
      const fail = (err: unknown) => settle(() => reject(err));
      const onAbort = () => {
        fail(signal.reason);
        req.destroy();
      };
      const req = send(url, {
        method,
        headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent,
      });
      signal.addEventListener('abort', onAbort, { once: true });
      req.on('error', fail);
      req.on('socket', (socket) => {
        if (!socket.connecting) return;
        connectTimer = setTimeout(() => req.destroy(codedError(`connect timeout after ${CONNECT_TIMEOUT_MS} ms`, 'CONNECT_TIMEOUT')), CONNECT_TIMEOUT_MS);
        socket.once('connect', () => clearTimeout(connectTimer));
      });
      req.on('response', (res) => {
        // Chunks decoded once at the end: a 500-message pop answer comes in dozens of them.
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => settle(() => resolve({ status: res.statusCode ?? 0, text: chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8') })));
        res.on('error', fail);
        res.on('close', () => {
          if (!res.complete) fail(codedError('the connection closed before the answer ended', 'ECONNRESET'));
        });
      });
      req.end(body);
    });

  return {
    exchange,
    async close() {
      closed = true;
      if (inFlight > 0) await new Promise<void>((r) => (closing = r));
      agent.destroy();
    },
  };
}

/**
 * A caller's undici dispatcher (the `dispatcher` option): undici is loaded
 * only then. Closing is the caller's business.
 */
export function dispatcherPath(dispatcher: Dispatcher): HttpPath {
  let undici: Promise<typeof import('undici')> | undefined;
  return {
    async exchange(method, url, headers, body, signal) {
      const { request } = await (undici ??= import('undici'));
      const res = await request(url, { method: method as Dispatcher.HttpMethod, headers, body, signal, dispatcher });
      return { status: res.statusCode, text: await res.body.text() };
    },
    async close() {},
  };
}
