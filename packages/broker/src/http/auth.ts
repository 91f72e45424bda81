import { createHash, timingSafeEqual, webcrypto } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { jwtVerify, type JWTPayload } from 'jose';
import { QueenError, type AccessLevel } from '@queen-mq/protocol';
import { checkJwtSecret, type ApiKey, type BrokerConfig } from '../context/config.js';

/** Who is calling: set by the auth hook; null subject when auth is off. */
export interface Principal {
  level: AccessLevel;
  subject: string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyContextConfig {
    level?: AccessLevel;
  }
}

type GrantedLevel = Exclude<AccessLevel, 'public'>;

/** Levels nest: admin ⊇ read-write ⊇ read-only. */
const rank: Record<AccessLevel, number> = { public: 0, 'read-only': 1, 'read-write': 2, admin: 3 };

/** Every request gets this when auth is off: all routes open, producerSub null. */
const OPEN: Principal = Object.freeze({ level: 'admin', subject: null });

/** JWT exp/nbf tolerance of PROTOCOL §1.4, in seconds. */
const CLOCK_SKEW_S = 30;

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

const isBlank = (code: number) => code === 32 || code === 9; // space, tab

/**
 * The token of `Bearer <token>` (scheme case-insensitive, blanks around the
 * token ignored); undefined when the header is absent, another scheme, or
 * empty. One pass over the header: it runs before auth has decided anything,
 * on input anyone can send, so it must not backtrack (a regex with a lazy
 * group and a trailing blank run was quadratic in a long header).
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length < 7 || header.slice(0, 6).toLowerCase() !== 'bearer' || !isBlank(header.charCodeAt(6))) return undefined;
  let start = 7;
  while (start < header.length && isBlank(header.charCodeAt(start))) start++;
  let end = header.length;
  while (end > start && isBlank(header.charCodeAt(end - 1))) end--;
  return end > start ? header.slice(start, end) : undefined;
}

/**
 * Turns a bearer token into a principal (PROTOCOL §1.4): a static API key
 * first, otherwise an HS256 JWT whose `role`/`roles` claims name a level.
 * Throws AUTH_INVALID for a token it cannot trust and FORBIDDEN for a
 * trusted token that names no known level.
 */
export class Authenticator {
  private readonly keys: { digest: Buffer; level: GrantedLevel; subject: string | null }[];
  private readonly secret?: Promise<webcrypto.CryptoKey>;
  private readonly roles: Map<string, GrantedLevel>;

  constructor(private readonly config: Pick<BrokerConfig, 'jwtSecret' | 'jwtIssuer' | 'jwtAudience' | 'roleReadOnly' | 'roleReadWrite' | 'roleAdmin'> & { apiKeys?: ApiKey[] }) {
    // Keys are kept as digests so every comparison is over equal-length buffers,
    // which timingSafeEqual needs and which hides the configured keys' lengths.
    this.keys = (config.apiKeys ?? []).map((k) => ({ digest: digest(k.key), level: k.level, subject: k.subject ?? null }));
    checkJwtSecret(config.jwtSecret);
    // Imported once: handing jose raw bytes re-imports the key on every verify (3x slower).
    this.secret = config.jwtSecret
      ? webcrypto.subtle.importKey('raw', new TextEncoder().encode(config.jwtSecret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify'])
      : undefined;
    this.roles = new Map<string, GrantedLevel>([
      [config.roleReadOnly, 'read-only'],
      [config.roleReadWrite, 'read-write'],
      [config.roleAdmin, 'admin'],
    ]);
  }

  /** `Authorization` header value → principal; AUTH_REQUIRED when absent or not Bearer. */
  async authenticate(header: string | undefined): Promise<Principal> {
    const token = bearerToken(header);
    if (token === undefined) throw new QueenError('AUTH_REQUIRED');
    // Anything after "Bearer " is the token; one that is neither key nor JWT is AUTH_INVALID.
    return this.fromApiKey(token) ?? (await this.fromJwt(token));
  }

  private fromApiKey(token: string): Principal | undefined {
    const probe = digest(token);
    let found: Principal | undefined;
    // No early exit: the time taken does not depend on which key matched.
    for (const k of this.keys) {
      if (timingSafeEqual(probe, k.digest) && !found) found = { level: k.level, subject: k.subject };
    }
    return found;
  }

  private async fromJwt(token: string): Promise<Principal> {
    if (!this.secret) throw new QueenError('AUTH_INVALID', 'Unknown API key');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await this.secret, {
        algorithms: ['HS256'],
        clockTolerance: CLOCK_SKEW_S,
        issuer: this.config.jwtIssuer,
        audience: this.config.jwtAudience,
        // A token without an expiry would be valid forever once leaked.
        requiredClaims: ['exp'],
      }));
    } catch {
      // jose's reason (expired, bad signature, alg not allowed, ...) stays
      // server-side: the client only learns the token is not accepted.
      throw new QueenError('AUTH_INVALID');
    }
    const level = this.levelOf(payload);
    if (!level) throw new QueenError('FORBIDDEN', 'Token carries no recognised role');
    return { level, subject: typeof payload.sub === 'string' ? payload.sub : null };
  }

  /** Highest level named by the `role` string and the `roles` array. */
  private levelOf(payload: JWTPayload): GrantedLevel | undefined {
    const names: unknown[] = [payload.role, ...(Array.isArray(payload.roles) ? payload.roles : [])];
    let best: GrantedLevel | undefined;
    for (const name of names) {
      const level = typeof name === 'string' ? this.roles.get(name) : undefined;
      if (level && (!best || rank[level] > rank[best])) best = level;
    }
    return best;
  }
}

/**
 * Registers step 2 of the request pipeline (PROTOCOL §1.2). It runs in
 * onRequest, after fastify's route match (an unknown route still answers 404
 * ROUTE_NOT_FOUND) and before the body is read, so a caller without the
 * right token gets 401/403 rather than 413 or 400 and never costs a body parse.
 */
export function registerAuth(app: FastifyInstance, config: BrokerConfig): void {
  app.decorateRequest('principal', undefined);
  if (!config.authEnabled) {
    app.addHook('onRequest', async (request) => {
      request.principal = OPEN;
    });
    return;
  }
  if (!config.jwtSecret && !config.apiKeys?.length) {
    throw new Error('QUEEN_AUTH_ENABLED is on but neither QUEEN_JWT_SECRET nor QUEEN_API_KEYS is set: no token could ever be accepted');
  }
  const authenticator = new Authenticator(config);
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS' || request.is404) return;
    // A matched route without a level was registered outside registerRoute:
    // treat it as admin-only rather than leave it open.
    const required: AccessLevel = request.routeOptions.config.level ?? 'admin';
    if (required === 'public') return;
    const principal = await authenticator.authenticate(request.headers.authorization);
    if (rank[principal.level] < rank[required]) {
      throw new QueenError('FORBIDDEN', `This route needs ${required}; the token grants ${principal.level}`);
    }
    request.principal = principal;
  });
}
