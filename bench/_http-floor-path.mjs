// The http floor as a bench path: _http-floor.mjs spawned in its own process
// (so its CPU and RSS are its own) and driven like the broker, one request
// per push, pop and ack. Used by peers.mjs and cpu-split.mjs.
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { spawnBroker } from './_lib.mjs';

export async function startHttpFloor(name, databaseUrl, { connections, partitions, batch }) {
  const server = await spawnBroker(name, databaseUrl, { FLOOR_POOL: String(connections), FLOOR_PARTITIONS: String(partitions), FLOOR_BATCH: String(batch) }, [],
    fileURLToPath(new URL('./_http-floor.mjs', import.meta.url)));
  const http = new Pool(server.url, { connections });
  const call = async (path, body) => {
    const r = await http.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await r.body.text();
    if (r.statusCode !== 200) throw new Error(`http floor ${path}: ${r.statusCode} ${text}`);
    return JSON.parse(text);
  };
  return {
    pid: server.pid,
    /** The server's origin: its /api/v1 routes speak Queen's wire (the wire floor, driven through @queen-mq/client). */
    url: server.url,
    setup: (queue) => call('/setup', { queue }),
    push: (queue, partition, items) => call('/push', { queue, partition, items }),
    /** One claim and its release; 0 when nothing was pending (the caller decides how long to wait). */
    async consume(queue) {
      const claim = await call('/pop', { queue });
      if (!claim) return 0;
      await call('/ack', claim);
      return claim.messages.length;
    },
    async stop() {
      await http.close();
      await server.stop();
    },
  };
}
