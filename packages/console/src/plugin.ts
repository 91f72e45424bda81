import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { BrokerContext, BrokerPlugin } from '@queen-mq/broker';
import { QueenError } from '@queen-mq/protocol';

/** The built UI: `npm run build` writes it here (build.mjs). */
const UI_DIR = fileURLToPath(new URL('../dist/ui/', import.meta.url));

/** The files the UI is made of, by the name it is served under. */
const ASSETS: Record<string, string> = {
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
};

/**
 * The page may load only its own script and style and talk only to this
 * broker; no other site may frame it (clickjacking of the admin buttons).
 */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export interface ConsoleOptions {
  /** Where the UI is served (default `/console`). */
  prefix?: string;
  /** The built UI's folder (default: this package's `dist/ui`). */
  uiDir?: string;
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-cache');
}

/**
 * The console as a broker plugin: `GET /console` answers the page and
 * `GET /console/assets/<file>` its script and style, read once at start-up.
 * These routes are public: they carry no data. Everything the page shows it
 * reads from the broker's API with the token the operator enters, so the
 * token's level decides what it sees and what it may do.
 *
 * When the UI has not been built (a source checkout before `npm run build`),
 * the broker still starts and `/console` answers 503 saying so.
 */
export function consolePlugin(options: ConsoleOptions = {}): BrokerPlugin {
  const prefix = (options.prefix ?? '/console').replace(/\/+$/, '');
  const dir = options.uiDir ?? UI_DIR;
  return (app: FastifyInstance, ctx: BrokerContext) => {
    const built = existsSync(`${dir}/index.html`);
    if (!built) ctx.log.warn({ dir }, 'console UI not built (run npm run build): /console answers 503');
    const files = new Map<string, Buffer>();
    if (built) {
      for (const name of Object.keys(ASSETS)) files.set(name, readFileSync(`${dir}/${name}`));
      files.set('index.html', Buffer.from(readFileSync(`${dir}/index.html`, 'utf8').replaceAll('%PREFIX%', prefix)));
    }
    const config = { level: 'public' as const };

    app.route({
      method: 'GET',
      url: prefix,
      config,
      handler: async (_request, reply) => {
        secure(reply);
        if (!built) {
          return reply.code(503).type('text/plain; charset=utf-8').send('The console UI is not built: run `npm run build` (packages/console).\n');
        }
        return reply.type('text/html; charset=utf-8').send(files.get('index.html'));
      },
    });

    app.route({
      method: 'GET',
      url: `${prefix}/assets/:file`,
      config,
      handler: async (request, reply) => {
        const name = (request.params as { file: string }).file;
        const type = ASSETS[name];
        const body = files.get(name);
        secure(reply);
        if (!type || !body) {
          return reply.code(404).send(new QueenError('ROUTE_NOT_FOUND', `No console asset ${name}`).toBody());
        }
        return reply.type(type).send(body);
      },
    });
  };
}
