import type { BrokerContext } from '../context/context.js';

/**
 * The history writer: flushes this broker's counts every
 * QUEEN_HISTORY_FLUSH_MS (nothing when it counted nothing and the minute's
 * sample was asked for), and once more when the broker stops.
 */
export function historyService(ctx: BrokerContext): { stop(): Promise<void> } {
  const history = ctx.metrics.history;
  if (ctx.config.historyFlushMs <= 0) return { stop: async () => undefined };
  const timer = setInterval(() => {
    // Skipped while PostgreSQL is down: the counts wait in memory.
    if (!ctx.shutdown.aborted && ctx.db.available) void history.flush(true);
  }, ctx.config.historyFlushMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      if (ctx.db.available) await history.flush();
    },
  };
}
