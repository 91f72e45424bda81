import type { Queen } from '@queen-mq/client';
import type { CycleRequest, CycleResponse, RegisterRequest, RegisterResponse, StateGetRequest, StateRow } from './wire.js';

const MAX_KEYS_PER_READ = 1000;

/**
 * The three streams routes the runner calls. Every call is safe to resend:
 * a cycle is fenced by its lease and its expected versions, so a resent
 * cycle that already committed answers LEASE_EXPIRED/ALREADY_ACKED or
 * VERSION_CONFLICT instead of applying twice.
 */
export class StreamsApi {
  constructor(private readonly queen: Queen) {}

  register(body: RegisterRequest): Promise<RegisterResponse> {
    return this.queen.request<RegisterResponse>('POST', '/streams/v1/queries', { body, idempotent: !body.reset });
  }

  cycle(body: CycleRequest): Promise<CycleResponse> {
    // The runner reads no per-output push result: ask for counts only.
    return this.queen.request<CycleResponse>('POST', '/streams/v1/cycle', { body: { ...body, push_result_detail: 'counts' }, idempotent: true });
  }

  /** state/get; a `keys` list longer than the route's limit is read in chunks. */
  async stateGet(body: StateGetRequest): Promise<StateRow[]> {
    if (body.keys && body.keys.length > MAX_KEYS_PER_READ) {
      const rows: StateRow[] = [];
      for (let i = 0; i < body.keys.length; i += MAX_KEYS_PER_READ) {
        rows.push(...(await this.stateGet({ ...body, keys: body.keys.slice(i, i + MAX_KEYS_PER_READ) })));
      }
      return rows;
    }
    if (body.keys && body.keys.length === 0) return [];
    const res = await this.queen.request<{ rows: StateRow[] }>('POST', '/streams/v1/state/get', { body, idempotent: true });
    return res.rows;
  }
}

export function rowsByKey(rows: readonly StateRow[]): Map<string, StateRow> {
  return new Map(rows.map((r) => [r.key, r]));
}
