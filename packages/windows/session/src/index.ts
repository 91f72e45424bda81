export { session, sessionOptionsSchema, SESSION_DEFAULT_IDLE_FLUSH_MS, type SessionOptions } from './session.js';
