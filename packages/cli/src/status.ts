import { QueenError, type readyResponse, type z } from '@queen-mq/protocol';
import type { CommandSpec } from './command.js';
import { EXIT } from './exit.js';
import { printObject } from './output.js';

/**
 * `queen status`: the broker (version, uptime), its database and schema
 * version, from /health and /ready. Exit 5 when the broker answers but is not
 * ready; 1 when it cannot be reached.
 */
export const statusCommand: CommandSpec = {
  options: {},
  positionals: [0, 0],
  async run({ io, queen, json }) {
    const health = await queen.api.health();
    let ready: z.output<typeof readyResponse>;
    try {
      // A 503 here is the answer, not a hiccup to retry.
      ready = await queen.api.ready({ idempotent: false });
    } catch (err) {
      // 503 NOT_READY carries the same fields as the 200 answer.
      if (!(err instanceof QueenError) || err.code !== 'NOT_READY') throw err;
      ready = err.extra as typeof ready;
    }
    printObject(io, json, {
      broker: queen.url,
      version: health.version,
      uptimeSeconds: health.uptimeSeconds,
      ready: ready.ready,
      database: ready.database,
      schemaVersion: ready.schemaVersion,
      expectedSchemaVersion: ready.expectedSchemaVersion,
    });
    return ready.ready ? EXIT.OK : EXIT.NOT_READY;
  },
};
