export { gate, type GateFn } from './gate.js';
export { tokenBucket, tokenBucketOptionsSchema, type TokenBucketOptions, type TokenBucketState } from './token-bucket.js';
export { slidingWindowLimit, slidingWindowLimitOptionsSchema, type SlidingWindowLimitOptions } from './sliding-window.js';
export type { LimiterClockOptions } from './clock.js';
