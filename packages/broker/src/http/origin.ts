import type { FastifyInstance, FastifyRequest } from 'fastify';
import { QueenError } from '@queen-mq/protocol';
import { checkCorsOrigins, type BrokerConfig } from '../context/config.js';

// What a web page may do to a broker (PROTOCOL §1.1). A broker on a
// developer's machine runs with auth off, so the browser is the attacker's
// only way in: a page the developer opens can send simple requests (GET,
// text/plain or form POSTs, which need no preflight) and, with DNS
// rebinding, read the answers too. Nothing here replaces auth on a deployed
// broker; it keeps a local one from being driven by whatever tab is open.

/** Listen addresses and Host names that only this machine reaches. */
function isLoopback(name: string): boolean {
  const host = name.toLowerCase();
  return host === 'localhost' || host === '::1' || host === '::ffff:127.0.0.1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** The name part of a Host header: `[::1]:6632` → `::1`, `localhost:6632` → `localhost`. */
function hostName(header: string): string {
  if (header.startsWith('[')) {
    const close = header.indexOf(']');
    return close === -1 ? header : header.slice(1, close);
  }
  const colon = header.indexOf(':');
  return colon === -1 ? header : header.slice(0, colon);
}

/**
 * Registers, before auth (PROTOCOL §1.2 step 1a): the Host check of a
 * loopback-bound broker, the refusal of cross-site browser requests from
 * unlisted origins, and CORS for the listed ones.
 */
export function registerOriginGuards(app: FastifyInstance, config: Pick<BrokerConfig, 'host' | 'corsOrigins' | 'authEnabled'>): void {
  checkCorsOrigins(config.corsOrigins, config.authEnabled);
  const anyOrigin = config.corsOrigins.includes('*');
  const listed = new Set(config.corsOrigins);
  const allowed = (origin: string | undefined) => origin !== undefined && (anyOrigin || listed.has(origin));
  // A name that resolves to 127.0.0.1 only because an attacker's DNS says so
  // (rebinding) arrives with the attacker's name in Host; a loopback listener
  // can be reached by loopback names alone, so any other name is refused.
  const checkHost = isLoopback(config.host);

  app.addHook('onRequest', async (request, reply) => {
    const host = request.headers.host;
    if (checkHost && host !== undefined && !isLoopback(hostName(host))) {
      throw new QueenError('HOST_NOT_ALLOWED', `Host "${host}" is not a loopback name; this broker listens on ${config.host} only`);
    }
    const origin = request.headers.origin;
    if (crossSite(request) && !allowed(origin)) {
      throw new QueenError('FORBIDDEN_ORIGIN', origin ? `Origin ${origin} is not listed in QUEEN_CORS_ORIGINS` : undefined);
    }
    if (listed.size > 0) {
      // The answer depends on Origin: caches must not hand one origin's answer to another.
      reply.header('Vary', 'Origin');
      if (allowed(origin)) {
        reply.header('Access-Control-Allow-Origin', origin!);
        // A page can read only the headers named here: the pop's paused flag is one it needs.
        reply.header('Access-Control-Expose-Headers', 'X-Queen-Pop-Paused');
      }
    }
  });

  if (listed.size === 0) return; // no CORS: an OPTIONS request is an unknown route (404)
  app.options('*', async (request, reply) => {
    if (!allowed(request.headers.origin)) throw new QueenError('FORBIDDEN_ORIGIN');
    reply
      .header('Access-Control-Allow-Methods', 'GET, POST, PUT, DELETE')
      .header('Access-Control-Allow-Headers', 'Authorization, Content-Type')
      .header('Access-Control-Max-Age', '600')
      .code(204)
      .send();
  });
}

/**
 * True for a request a browser sent on behalf of another site. Current
 * browsers (Chrome 76+, Firefox 90+, Safari 16.4+) say so in Sec-Fetch-Site
 * on every request, `<img>` GETs included. Older ones send only Origin, and
 * only on cross-origin non-GET requests; there, an Origin naming a host
 * other than the one addressed counts as cross-site. Clients that are not browsers send
 * neither and are never refused here.
 */
function crossSite(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined) return site === 'cross-site' || site === 'same-site';
  const origin = request.headers.origin;
  if (origin === undefined) return false;
  if (origin === 'null') return true; // sandboxed frames, file:// pages
  try {
    return new URL(origin).host !== request.headers.host;
  } catch {
    return true;
  }
}
