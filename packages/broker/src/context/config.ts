/** Server settings of PROTOCOL §9, read once from the environment. */
export interface BrokerConfig {
  port: number;
  /** Listen address; 127.0.0.1 unless QUEEN_HOST says otherwise (0.0.0.0 for deployments). */
  host: string;
  databaseUrl?: string;
  maxBodyBytes: number;
  maxPushItems: number;
  maxPopBatch: number;
  maxPopTimeoutMs: number;
  /**
   * QUEEN_MAX_POP_BYTES: a pop answer's size bound (default 8 MiB; 0 = none).
   * A pop claims and leases only the messages that fit, at least one; the
   * rest stay available to the next pop.
   */
  maxPopBytes: number;
  defaultSubscriptionMode: 'all' | 'new';
  segmentMaxMessages: number;
  segmentMaxAgeS: number;
  retentionIntervalMs: number;
  partitionCleanupS: number;
  timerPollMs: number;
  /** QUEEN_SCHEDULE_MISFIRE_MS: a schedule's fire time older than this when a pass reaches it is missed (follows the schedule's `missed`). */
  scheduleMisfireMs: number;
  /** QUEEN_SCHEDULE_MAX_SLEEP_MS: the schedule firer's longest sleep (how soon a schedule made through another broker is seen). */
  scheduleMaxSleepMs: number;
  poolSize: number;
  /**
   * QUEEN_METRICS_TOP_N: most label sets a per-queue (or per-group, per-query)
   * series shows on /metrics: the N largest, so a scrape stays bounded
   * whatever the number of queues (default 100).
   */
  metricsTopN: number;
  /**
   * QUEEN_LISTING_TOTALS_MS: how soon after a write the listing totals
   * (queues, groups, console, /metrics gauges) count it (default 1000;
   * docs/listing-totals.md). A recount runs only after a write.
   */
  listingTotalsMs: number;
  /** QUEEN_STATEMENT_TIMEOUT_MS: server-side bound of one ordinary statement (0 = none); a long-poll pop waits outside SQL. */
  statementTimeoutMs: number;
  /** QUEEN_SHUTDOWN_TIMEOUT_MS: how long SIGTERM/SIGINT may drain before the process exits anyway. */
  shutdownTimeoutMs: number;
  logLevel: string;
  /** PROTOCOL §1.4: off by default, every route open and producerSub null. */
  authEnabled: boolean;
  /** HS256 secret for JWTs; unset = only static API keys are accepted. */
  jwtSecret?: string;
  /** Checked against `iss` / `aud` only when set. */
  jwtIssuer?: string;
  jwtAudience?: string;
  /** Static bearer tokens with a fixed level and subject (QUEEN_API_KEYS). */
  apiKeys: ApiKey[];
  /** Role names in the JWT `role`/`roles` claims that map to each level. */
  roleReadOnly: string;
  roleReadWrite: string;
  roleAdmin: string;
  /** QUEEN_ENCRYPTION_KEY: 64 hex chars (AES-256); unset = encryptionEnabled is refused. */
  encryptionKey?: string;
  /**
   * QUEEN_CORS_ORIGINS: browser origins (`https://console.example.com`)
   * that get CORS headers and may call cross-site; `*` = any. Empty = none.
   */
  corsOrigins: string[];
  /** Time a client has to send a whole request (headers and body), ms; 0 = unlimited. */
  requestTimeoutMs: number;
  /** Open HTTP connections beyond this are closed on accept (parked pops hold one each). */
  maxConnections: number;
}

/** HS256 keys shorter than the hash output are guessable offline from any token (RFC 7518 §3.2). */
const MIN_JWT_SECRET_BYTES = 32;

/** Throws, at start-up, for a JWT secret too short to be safe. */
export function checkJwtSecret(secret: string | undefined): void {
  if (secret !== undefined && Buffer.byteLength(secret, 'utf8') < MIN_JWT_SECRET_BYTES) {
    throw new Error(`QUEEN_JWT_SECRET must be at least ${MIN_JWT_SECRET_BYTES} bytes (got ${Buffer.byteLength(secret, 'utf8')}): a shorter HS256 secret can be brute-forced from any token`);
  }
}

/**
 * Throws, at start-up, for `*` in QUEEN_CORS_ORIGINS without auth: every web
 * page could then drive the broker, which is what the origin checks are for.
 */
export function checkCorsOrigins(origins: readonly string[], authEnabled: boolean): void {
  if (origins.includes('*') && !authEnabled) {
    throw new Error('QUEEN_CORS_ORIGINS=* needs QUEEN_AUTH_ENABLED=true: without auth any web page could push, pop and ack; list the origins instead');
  }
}

function corsOrigins(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '') return [];
  return raw.split(',').map((entry) => {
    const origin = entry.trim();
    if (origin === '*') return origin;
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    // Browsers send the serialised origin (scheme://host[:port], no path,
    // lower-case host), so anything else could never match.
    if (!parsed || parsed.origin === 'null' || parsed.origin !== origin) {
      throw new Error(`QUEEN_CORS_ORIGINS: "${origin}" is not an origin like https://app.example.com or http://localhost:3000 (comma-separated, or *)`);
    }
    return origin;
  });
}

/** One entry of QUEEN_API_KEYS. */
export interface ApiKey {
  key: string;
  level: 'read-only' | 'read-write' | 'admin';
  subject: string | null;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return n;
}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new Error(`${name} must be true/false/1/0, got "${raw}"`);
}

function apiKeys(raw: string | undefined): ApiKey[] {
  if (raw === undefined || raw.trim() === '') return [];
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    throw new Error('QUEEN_API_KEYS must be a JSON array of {key, level, subject}');
  }
  if (!Array.isArray(list)) throw new Error('QUEEN_API_KEYS must be a JSON array of {key, level, subject}');
  return list.map((entry: any, i) => {
    if (typeof entry?.key !== 'string' || entry.key === '') throw new Error(`QUEEN_API_KEYS[${i}].key must be a non-empty string`);
    if (!['read-only', 'read-write', 'admin'].includes(entry.level)) throw new Error(`QUEEN_API_KEYS[${i}].level must be read-only, read-write or admin`);
    if (entry.subject != null && typeof entry.subject !== 'string') throw new Error(`QUEEN_API_KEYS[${i}].subject must be a string`);
    return { key: entry.key, level: entry.level, subject: entry.subject ?? null };
  });
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): BrokerConfig {
  const mode = env.QUEEN_DEFAULT_SUBSCRIPTION_MODE ?? 'all';
  if (mode !== 'all' && mode !== 'new') throw new Error(`QUEEN_DEFAULT_SUBSCRIPTION_MODE must be "all" or "new", got "${mode}"`);
  const authEnabled = bool(env, 'QUEEN_AUTH_ENABLED', false);
  const keys = apiKeys(env.QUEEN_API_KEYS);
  if (authEnabled && !env.QUEEN_JWT_SECRET && keys.length === 0) {
    throw new Error('QUEEN_AUTH_ENABLED=true needs QUEEN_JWT_SECRET or QUEEN_API_KEYS: otherwise no token could ever be accepted');
  }
  checkJwtSecret(env.QUEEN_JWT_SECRET || undefined);
  const origins = corsOrigins(env.QUEEN_CORS_ORIGINS);
  checkCorsOrigins(origins, authEnabled);
  const encryptionKey = env.QUEEN_ENCRYPTION_KEY || undefined;
  if (encryptionKey !== undefined && !/^[0-9a-fA-F]{64}$/.test(encryptionKey)) {
    throw new Error('QUEEN_ENCRYPTION_KEY must be 64 hex characters (a 256-bit AES key)');
  }
  return {
    port: int(env, 'QUEEN_PORT', 6632),
    host: env.QUEEN_HOST || '127.0.0.1',
    databaseUrl: env.DATABASE_URL || env.QUEEN_DATABASE_URL || undefined,
    maxBodyBytes: int(env, 'QUEEN_MAX_BODY_BYTES', 10 * 1024 * 1024),
    maxPushItems: int(env, 'QUEEN_MAX_PUSH_ITEMS', 10000),
    maxPopBatch: int(env, 'QUEEN_MAX_POP_BATCH', 10000),
    maxPopTimeoutMs: int(env, 'QUEEN_MAX_POP_TIMEOUT_MS', 300000),
    maxPopBytes: int(env, 'QUEEN_MAX_POP_BYTES', 8 * 1024 * 1024),
    defaultSubscriptionMode: mode,
    segmentMaxMessages: int(env, 'QUEEN_SEGMENT_MAX_MESSAGES', 10000),
    segmentMaxAgeS: int(env, 'QUEEN_SEGMENT_MAX_AGE_S', 3600),
    retentionIntervalMs: int(env, 'QUEEN_RETENTION_INTERVAL_MS', 300000),
    partitionCleanupS: int(env, 'QUEEN_PARTITION_CLEANUP_S', 2592000),
    timerPollMs: int(env, 'QUEEN_TIMER_POLL_MS', 200),
    scheduleMisfireMs: int(env, 'QUEEN_SCHEDULE_MISFIRE_MS', 1000),
    scheduleMaxSleepMs: int(env, 'QUEEN_SCHEDULE_MAX_SLEEP_MS', 5000),
    poolSize: int(env, 'QUEEN_DB_POOL_SIZE', 20),
    metricsTopN: int(env, 'QUEEN_METRICS_TOP_N', 100),
    listingTotalsMs: int(env, 'QUEEN_LISTING_TOTALS_MS', 1000),
    statementTimeoutMs: int(env, 'QUEEN_STATEMENT_TIMEOUT_MS', 30000),
    shutdownTimeoutMs: int(env, 'QUEEN_SHUTDOWN_TIMEOUT_MS', 25000),
    logLevel: env.QUEEN_LOG_LEVEL ?? env.LOG_LEVEL ?? 'info',
    authEnabled,
    jwtSecret: env.QUEEN_JWT_SECRET || undefined,
    jwtIssuer: env.QUEEN_JWT_ISSUER || undefined,
    jwtAudience: env.QUEEN_JWT_AUDIENCE || undefined,
    apiKeys: keys,
    roleReadOnly: env.QUEEN_ROLE_READ_ONLY || 'read-only',
    roleReadWrite: env.QUEEN_ROLE_READ_WRITE || 'read-write',
    roleAdmin: env.QUEEN_ROLE_ADMIN || 'admin',
    encryptionKey,
    corsOrigins: origins,
    requestTimeoutMs: int(env, 'QUEEN_REQUEST_TIMEOUT_MS', 30000),
    maxConnections: int(env, 'QUEEN_MAX_CONNECTIONS', 10000),
  };
}
