export { runApiBudget, type ApiBudgetOptions } from './budget.js';
export { runTenantRateLimit, submitRequest, type TenantRateLimitOptions } from './tenant-rate-limit.js';
