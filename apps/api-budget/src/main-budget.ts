#!/usr/bin/env node
// The seed's fixed-budget example as a deployable worker: api-requests →
// api-allowed, 10 requests per key. QUEEN_URL points it at a broker
// (default http://localhost:6632); API_BUDGET overrides the budget.
import { runApiBudget } from './budget.js';

const url = process.env.QUEEN_URL ?? 'http://localhost:6632';
const budget = process.env.API_BUDGET ? Number(process.env.API_BUDGET) : 10;
const { handle, queen } = await runApiBudget({ url, budget, onError: (e) => console.error(e.message) });
handle.on('cycle:commit', (c) => console.log(`admitted ${c.messages} request(s) of ${c.partition}`));
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void handle.stop().then(() => queen.close()).then(() => process.exit(0));
  });
}
// Last, once SIGTERM is handled: whoever waits for this line may stop it right away.
console.log(`api-budget running against ${url} (query ${handle.queryUuid}, budget ${budget})`);
