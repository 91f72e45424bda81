#!/usr/bin/env node
// The seed's example, as written, as a deployable worker. QUEEN_URL points it
// at a broker (default http://localhost:6632). Stops cleanly on SIGINT/SIGTERM.
import { Queen, Stream } from 'queen-mq';

const url = process.env.QUEEN_URL ?? 'http://localhost:6632';
const queen = new Queen({ url });

const handle = await Stream
  .from(queen.queue('orders'))
  .filter(msg => msg.data.amount > 0)
  .windowTumbling({ seconds: 60, idleFlushMs: 5000 })
  .aggregate({ count: () => 1, sum: m => m.amount })
  .to(queen.queue('orders.per_minute'))
  .run({ queryId: 'orders.per_minute', url, batchSize: 50 })

handle.on('window:flush', (f) => console.log(`flushed ${f.emits} window(s) of ${f.partition}`));
handle.on('cycle:commit', (c) => c.emits > 0 && console.log(`closed ${c.emits} window(s) of ${c.partition}`));
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void handle.stop().then(() => queen.close()).then(() => process.exit(0));
  });
}
// Last, once SIGTERM is handled: whoever waits for this line may stop it right away.
console.log(`orders-per-minute running against ${url} (query ${handle.queryUuid})`);
