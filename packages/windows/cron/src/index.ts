export {
  cron,
  cronOptionsSchema,
  CRON_UNITS,
  CRON_DEFAULT_IDLE_FLUSH_MS,
  type CronOptions,
  type CronUnitOptions,
  type CronExpressionOptions,
  type CronUnit,
} from './cron.js';
