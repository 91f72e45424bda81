import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** At least this much of an unread body is discarded, however small QUEEN_MAX_BODY_BYTES is. */
const MIN_DISCARD_BYTES = 1024 * 1024;
/** How long a connection cut off past the bound stays half-closed before it is destroyed. */
const LINGER_MS = 2000;

/**
 * An answer sent before the request body was read (413 on a body over
 * QUEEN_MAX_BODY_BYTES, 401/403, 415, 404) keeps its connection until the
 * client can have read it.
 *
 * Why: fastify answers a too-large body with `Connection: close`, and Node
 * then destroys the socket right after the answer while the rest of the body
 * is still arriving. A socket closed with unread bytes in the kernel's
 * receive buffer sends an RST, and an RST that reaches the client before it
 * has read the answer discards it: the client sees EPIPE or ECONNRESET
 * instead of 413 (a 4 MiB push against a 64 KiB limit lost that race in most
 * of 20 runs).
 *
 * So the answer goes out without `Connection: close` (Node keeps the socket
 * and its parser reads on), and the rest of the body is discarded as it
 * arrives, up to a bound: the larger of QUEEN_MAX_BODY_BYTES and 1 MiB. A
 * body sent in full within the bound leaves the connection reusable. Past the
 * bound (or when Content-Length already says the rest exceeds it) the broker
 * stops reading, half-closes, and destroys the socket {@link LINGER_MS} later:
 * the client, reading its answer while it writes (fetch, undici, node:http
 * all do), has it long before. A client that stalls is cut off by
 * QUEEN_REQUEST_TIMEOUT_MS, which Node counts from the request's start.
 */
export function registerUnreadBodyDiscard(app: FastifyInstance, maxBodyBytes: number, closing: AbortSignal): void {
  const bound = Math.max(maxBodyBytes, MIN_DISCARD_BYTES);
  app.addHook('onSend', async (request, reply) => {
    const raw = request.raw;
    if (raw.complete || raw.destroyed || closing.aborted) return;
    // Also over fastify's `close` (set on a body it refused) and a client's
    // own `Connection: close`: either makes Node destroy the socket as soon
    // as the answer is written.
    reply.header('connection', 'keep-alive');
    if (Number(raw.headers['content-length']) > bound) {
      // After Node's own end-of-response step, which resumes an unread body.
      reply.raw.once('finish', () => cutOff(raw));
      return;
    }
    let discarded = 0;
    // A 'data' listener keeps the body flowing and marks it as being read,
    // so Node does not dump it (which would remove this listener).
    const onData = (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded <= bound) return;
      raw.removeListener('data', onData);
      cutOff(raw);
    };
    raw.on('data', onData);
  });
}

/**
 * Stops reading the body (Node's backpressure stops reading the socket once
 * the paused request's buffer fills), sends FIN after the answer, and
 * destroys the socket after the linger unless the client closes first.
 */
function cutOff(raw: IncomingMessage): void {
  const socket: Socket | null = raw.socket;
  if (!socket || socket.destroyed) return;
  raw.pause();
  socket.end();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
  socket.once('close', () => clearTimeout(timer));
}
