export { sliding, slidingOptionsSchema, SLIDING_DEFAULT_IDLE_FLUSH_MS, type SlidingOptions } from './sliding.js';
