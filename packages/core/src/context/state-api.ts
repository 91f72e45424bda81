import type { Queen } from '@queen-mq/client';
import { QueenError, type AckResult } from '@queen-mq/protocol';
import type { CycleRequest, CycleResponse, MigrationClaimRequest, MigrationCommitRequest, RegisterRequest, RegisterResponse, StateGetRequest, StateRow } from './wire.js';

const MAX_KEYS_PER_READ = 1000;

/**
 * The streams routes the runner calls, through the client's typed route calls. Every call is safe to resend:
 * a cycle is fenced by its lease and its expected versions, so a resent
 * cycle that already committed answers LEASE_EXPIRED/ALREADY_ACKED or
 * VERSION_CONFLICT instead of applying twice.
 */
export class StreamsApi {
  constructor(private readonly queen: Queen) {}

  register(body: RegisterRequest): Promise<RegisterResponse> {
    return this.queen.api.streamsRegister({ body, idempotent: !body.reset });
  }

  /** Claims one partition's state migration (issue 33); answers whether this runner holds it, or it is done. */
  migrationClaim(body: MigrationClaimRequest): Promise<{ claimed: boolean; done: boolean }> {
    return this.queen.api.streamsMigrationClaim({ body, idempotent: true });
  }

  /** Commits a claimed migration; refused MIGRATION_NOT_CLAIMED once done, so a resend applies nothing twice. */
  migrationCommit(body: MigrationCommitRequest): Promise<{ state_ops_applied: number }> {
    return this.queen.api.streamsMigrationCommit({ body, idempotent: true });
  }

  /** One KV entry's value and version (a lookup's read), or null when the key is absent. */
  async kvEntry(namespace: string, key: string): Promise<{ value: unknown; version: number } | null> {
    try {
      const entry = await this.queen.api.kvGet({ params: { namespace, key }, idempotent: true });
      return { value: entry.value, version: entry.version };
    } catch (err) {
      if (err instanceof QueenError && err.code === 'KV_NOT_FOUND') return null;
      throw err;
    }
  }

  cycle(body: CycleRequest): Promise<CycleResponse> {
    // The runner reads no per-output push result but the duplicates (reemit-report.ts): the counts and those only.
    return this.queen.api.streamsCycle({ body: { ...body, push_result_detail: 'duplicates' }, idempotent: true });
  }

  /**
   * Acks one leased source message `failed` (PROTOCOL §5.5): one failure
   * charged, then a redelivery or, past the queue's retryLimit, the DLQ.
   * Fenced by the lease, so a resend after a lost answer charges nothing twice.
   */
  async failMessage(item: { transactionId: string; partitionId: string; leaseId: string; consumerGroup: string; error: string }): Promise<AckResult> {
    const [res] = await this.queen.ack({ ...item, status: 'failed' }, { consumerGroup: item.consumerGroup });
    return res!;
  }

  /** state/get, every page; a `keys` list longer than the route's limit is read in chunks. */
  async stateGet(body: StateGetRequest): Promise<StateRow[]> {
    if (body.keys && body.keys.length > MAX_KEYS_PER_READ) {
      const rows: StateRow[] = [];
      for (let i = 0; i < body.keys.length; i += MAX_KEYS_PER_READ) {
        rows.push(...(await this.stateGet({ ...body, keys: body.keys.slice(i, i + MAX_KEYS_PER_READ) })));
      }
      return rows;
    }
    if (body.keys && body.keys.length === 0) return [];
    // The route answers at most a page of rows (PROTOCOL §7.5): follow `next_after` to the end, or a
    // flush over a partition with more open windows than a page would never see the rest.
    const rows: StateRow[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await this.queen.api.streamsStateGet({ body: after === undefined ? body : { ...body, after }, idempotent: true });
      rows.push(...res.rows);
      if (!res.next_after) return rows;
      after = res.next_after;
    }
  }
}

export function rowsByKey(rows: readonly StateRow[]): Map<string, StateRow> {
  return new Map(rows.map((r) => [r.key, r]));
}
