#!/usr/bin/env node
// Per-tenant token bucket as a deployable worker: api-requests.by-tenant
// (one partition per tenant) → api-admitted. QUEEN_URL points it at a broker
// (default http://localhost:6632); CAPACITY / REFILL_PER_SECOND tune it,
// MAX_WAIT_MS how long the gate waits for a token (0 = defer by lease).
import { runTenantRateLimit } from './tenant-rate-limit.js';

const url = process.env.QUEEN_URL ?? 'http://localhost:6632';
const capacity = process.env.CAPACITY ? Number(process.env.CAPACITY) : 10;
const refillPerSecond = process.env.REFILL_PER_SECOND ? Number(process.env.REFILL_PER_SECOND) : 20;
const maxWaitMs = process.env.MAX_WAIT_MS ? Number(process.env.MAX_WAIT_MS) : undefined;
const { handle, queen } = await runTenantRateLimit({ url, capacity, refillPerSecond, maxWaitMs, onError: (e) => console.error(e.message) });
handle.on('cycle:commit', (c) => console.log(`admitted ${c.messages} request(s) of tenant ${c.partition}`));
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void handle.stop().then(() => queen.close()).then(() => process.exit(0));
  });
}
// Last, once SIGTERM is handled: whoever waits for this line may stop it right away.
console.log(`tenant-rate-limit running against ${url} (query ${handle.queryUuid}, ${capacity} burst, ${refillPerSecond}/s per tenant)`);
