#!/usr/bin/env node
// Orders joined with their payments within 5 minutes, as a deployable worker.
// QUEEN_URL points it at a broker (default http://localhost:6632). Stops
// cleanly on SIGINT/SIGTERM.
import { runOrdersPayments } from './orders-payments.js';

const url = process.env.QUEEN_URL ?? 'http://localhost:6632';
const { handle, queen } = await runOrdersPayments({ url, onError: (e) => console.error(e.message) });
handle.on('cycle:commit', (c) => c.emits > 0 && console.log(`${c.emits} order(s) out of partition ${c.partition}`));
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void handle.stop().then(() => queen.close()).then(() => process.exit(0));
  });
}
console.log(`orders-payments running against ${url} (query ${handle.queryUuid})`);
