import type { FastifyReply } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** At least this much of an unread body is discarded, however small QUEEN_MAX_BODY_BYTES is. */
const MIN_DISCARD_BYTES = 1024 * 1024;
/** How long a connection cut off past the bound stays half-closed before it is destroyed. */
const LINGER_MS = 2000;

/** Bytes of an unread body discarded after an early answer: the larger of QUEEN_MAX_BODY_BYTES and 1 MiB. */
export function discardBound(maxBodyBytes: number): number {
  return Math.max(maxBodyBytes, MIN_DISCARD_BYTES);
}

/**
 * Called from onSend for an answer sent before the request body was read
 * (413 on a body over QUEEN_MAX_BODY_BYTES, 401/403, 415, 404): keeps the
 * connection until the client can have read the answer.
 *
 * Why: fastify answers a too-large body with `Connection: close`, and Node
 * then destroys the socket right after the answer while the rest of the body
 * is still arriving. A socket closed with unread bytes in the kernel's
 * receive buffer sends an RST, and an RST that reaches the client before it
 * has read the answer discards it: the client sees EPIPE or ECONNRESET
 * instead of 413 (a 4 MiB push against a 64 KiB limit lost that race in up
 * to 16 of 20 runs).
 *
 * So the answer says `Connection: keep-alive` (over fastify's `close` and a
 * client's own: either makes Node destroy the socket as soon as the answer
 * is written), Node's parser reads on, and the rest of the body is discarded
 * as it arrives, up to `bound` bytes. A body sent in full within the bound
 * leaves the connection reusable. Past the bound (or when Content-Length
 * already says so) the broker stops reading, half-closes, and destroys the
 * socket {@link LINGER_MS} later: the client, reading its answer while it
 * writes (fetch, undici, node:http all do), has it long before. A client
 * that stalls is cut off by QUEEN_REQUEST_TIMEOUT_MS, which Node counts from
 * the request's start.
 */
export function keepForUnreadBody(raw: IncomingMessage, reply: FastifyReply, bound: number): void {
  if (raw.destroyed) return;
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
