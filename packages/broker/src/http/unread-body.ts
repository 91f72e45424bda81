import type { FastifyReply } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** At least this much past QUEEN_MAX_BODY_BYTES is discarded, however small the limit is. */
const MIN_DISCARD_BYTES = 1024 * 1024;
/** How long a connection cut off past the bound stays half-closed before it is destroyed. */
const LINGER_MS = 2000;

/**
 * Bytes of an unread body discarded after an early answer: the limit, and
 * past it as much again (at least 1 MiB). The bound must lie above the
 * limit: the 413 for a body over it is the common early answer, and a bound
 * equal to the limit cut off every such body that declared its length.
 */
export function discardBound(maxBodyBytes: number): number {
  return maxBodyBytes + Math.max(maxBodyBytes, MIN_DISCARD_BYTES);
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
 * instead of 413.
 *
 * So, within `bound`, the answer says `Connection: keep-alive` (over
 * fastify's `close` and a client's own: either makes Node destroy the socket
 * as soon as the answer is written), Node's parser reads on, and the rest of
 * the body is discarded as it arrives. A body sent in full within the bound
 * leaves the connection reusable.
 *
 * A body whose Content-Length is past the bound is answered with
 * `Connection: close`, and the close is ours instead of Node's: the broker
 * stops reading, half-closes, and destroys the socket {@link LINGER_MS}
 * later. The client, reading its answer while it writes (fetch, undici,
 * node:http all do), has it long before, and knows the connection ends:
 * node:http, told keep-alive, kept the socket as its own and raised the
 * write error of the cut as an uncaught exception. A chunked body found past
 * the bound while it arrives is cut off the same way (its answer is sent
 * already). A client that stalls is cut off by QUEEN_REQUEST_TIMEOUT_MS,
 * which Node counts from the request's start.
 */
export function keepForUnreadBody(raw: IncomingMessage, reply: FastifyReply, bound: number): void {
  if (raw.destroyed) return;
  if (Number(raw.headers['content-length']) > bound) {
    reply.header('connection', 'close');
    // Node ends a `close` answer's socket with destroySoon once the answer
    // is written (after resuming the unread body): the linger replaces it.
    const socket = raw.socket as Socket & { destroySoon?: () => void };
    socket.destroySoon = () => cutOff(raw);
    return;
  }
  reply.header('connection', 'keep-alive');
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
