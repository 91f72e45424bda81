export { runInverseRateLimiter, type InverseRateLimiter, type InverseRateLimiterOptions } from './limiter.js';
export { alignedWindow, ttlWindow, type AdmissionWindow } from './windows.js';
export { retryTransactionId, originalTransactionId } from './retry-id.js';
