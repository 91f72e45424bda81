export { tumbling, tumblingOptionsSchema, TUMBLING_DEFAULT_IDLE_FLUSH_MS, type TumblingOptions } from './tumbling.js';
