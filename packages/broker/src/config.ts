/** Server settings of PROTOCOL §9, read once from the environment. */
export interface BrokerConfig {
  port: number;
  host: string;
  databaseUrl?: string;
  maxBodyBytes: number;
  maxPushItems: number;
  maxPopBatch: number;
  maxPopTimeoutMs: number;
  defaultSubscriptionMode: 'all' | 'new';
  segmentMaxMessages: number;
  segmentMaxAgeS: number;
  retentionIntervalMs: number;
  partitionCleanupS: number;
  timerPollMs: number;
  poolSize: number;
  logLevel: string;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return n;
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): BrokerConfig {
  const mode = env.QUEEN_DEFAULT_SUBSCRIPTION_MODE ?? 'all';
  if (mode !== 'all' && mode !== 'new') throw new Error(`QUEEN_DEFAULT_SUBSCRIPTION_MODE must be "all" or "new", got "${mode}"`);
  return {
    port: int(env, 'QUEEN_PORT', 6632),
    host: env.QUEEN_HOST ?? '0.0.0.0',
    databaseUrl: env.DATABASE_URL || env.QUEEN_DATABASE_URL || undefined,
    maxBodyBytes: int(env, 'QUEEN_MAX_BODY_BYTES', 10 * 1024 * 1024),
    maxPushItems: int(env, 'QUEEN_MAX_PUSH_ITEMS', 10000),
    maxPopBatch: int(env, 'QUEEN_MAX_POP_BATCH', 10000),
    maxPopTimeoutMs: int(env, 'QUEEN_MAX_POP_TIMEOUT_MS', 300000),
    defaultSubscriptionMode: mode,
    segmentMaxMessages: int(env, 'QUEEN_SEGMENT_MAX_MESSAGES', 10000),
    segmentMaxAgeS: int(env, 'QUEEN_SEGMENT_MAX_AGE_S', 3600),
    retentionIntervalMs: int(env, 'QUEEN_RETENTION_INTERVAL_MS', 300000),
    partitionCleanupS: int(env, 'QUEEN_PARTITION_CLEANUP_S', 2592000),
    timerPollMs: int(env, 'QUEEN_TIMER_POLL_MS', 200),
    poolSize: int(env, 'QUEEN_DB_POOL_SIZE', 20),
    logLevel: env.QUEEN_LOG_LEVEL ?? env.LOG_LEVEL ?? 'info',
  };
}
