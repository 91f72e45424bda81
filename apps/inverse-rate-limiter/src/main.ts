#!/usr/bin/env node
// The inverse rate limiter as a deployable worker, configured from the
// environment (README table). Stops cleanly on SIGINT/SIGTERM.
import { Queen } from 'queen-mq';
import { runInverseRateLimiter } from './limiter.js';
import { alignedWindow } from './windows.js';

const env = process.env;
const queen = new Queen({ url: env.QUEEN_URL ?? 'http://localhost:6632', bearerToken: env.QUEEN_TOKEN || undefined });
const limiter = runInverseRateLimiter({
  queen,
  source: env.RL_SOURCE ?? 'jobs',
  work: env.RL_WORK ?? 'jobs.admitted',
  window: alignedWindow({ namespace: env.RL_NAMESPACE ?? 'rl', limit: Number(env.RL_LIMIT ?? 100), periodMs: Number(env.RL_PERIOD_MS ?? 1000) }),
  concurrency: Number(env.RL_CONCURRENCY ?? 1),
});
const stop = async () => {
  await limiter.stop();
  await queen.close();
  console.log('inverse-rate-limiter: stopped', limiter.stats);
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
// Last, once SIGTERM is handled: whoever waits for this line may stop it right away.
console.log(`inverse-rate-limiter: ${env.RL_SOURCE ?? 'jobs'} → ${env.RL_WORK ?? 'jobs.admitted'}, ${env.RL_LIMIT ?? 100} per ${env.RL_PERIOD_MS ?? 1000} ms per key`);
