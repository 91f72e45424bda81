#!/usr/bin/env node
// Revenue per customer per calendar month in Europe/Berlin: the custom window
// plugged into the generic `.window(plugin, options)`. QUEEN_URL points it at
// a broker (default http://localhost:6632); TZ_NAME changes the zone.
import { Queen, Stream } from 'queen-mq';
import { calendarMonth } from './calendar-month.js';

const url = process.env.QUEEN_URL ?? 'http://localhost:6632';
const queen = new Queen({ url });

const handle = await Stream.from(queen.queue('orders'))
  .keyBy((m) => m.data.customer)
  .window(calendarMonth({ timeZone: process.env.TZ_NAME ?? 'Europe/Berlin' }), { eventTime: (m) => m.data.ts })
  .aggregate({ count: () => 1, sum: (o) => o.amount })
  .map((agg, ctx) => ({ customer: ctx.key, month: new Date(ctx.windowStart!).toISOString(), ...agg }))
  .to(queen.queue('orders.per_month'))
  .run({ queryId: 'orders.per_month', url });

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void handle.stop().then(() => queen.close()).then(() => process.exit(0)));
}
// Last, once SIGTERM is handled: whoever waits for this line may stop it right away.
console.log(`custom-window (orders per calendar month) running against ${url} (query ${handle.queryUuid})`);
