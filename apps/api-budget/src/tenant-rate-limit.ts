import { Queen, Stream, tokenBucket, type RunHandle } from 'queen-mq';

/** Options of {@link runTenantRateLimit}. */
export interface TenantRateLimitOptions {
  url: string;
  /** Source queue, partitioned by tenant (see {@link submitRequest}). Default `api-requests.by-tenant`. */
  source?: string;
  /** Where admitted requests go, same partition (tenant) as the source. Default `api-admitted`. */
  sink?: string;
  /** Stream query name. Default `api-tenant-rate-limit`. */
  queryId?: string;
  /** Burst per tenant. Default 10. */
  capacity?: number;
  /** Sustained requests per second per tenant. Default 20. */
  refillPerSecond?: number;
  /**
   * How long (ms) the gate may wait for the next token instead of denying.
   * Default 1000 here, an explicit choice (the limiter's own default is 0:
   * deny and defer the rest of the batch by lease): a deny costs at least a
   * lease period before the tail returns, which caps a tenant near
   * `capacity / leaseTime`; waiting up to a second keeps it at
   * `refillPerSecond`. 0 = defer by lease.
   */
  maxWaitMs?: number;
  /** Messages per pop. Default 20 (about one second of refill, so admitted work reaches the sink steadily). */
  batchSize?: number;
  /** Partitions (tenants) one pop may claim. Default 4. */
  maxPartitions?: number;
  onError?: (error: Error) => void;
}

/**
 * A token bucket per tenant. The source queue is partitioned by tenant, so
 * the gate's state key — the source partition id, no keyBy — is the tenant,
 * each tenant's order is its partition's order, and tenants never wait on
 * each other's leases. Run several copies for parallelism across tenants.
 */
export async function runTenantRateLimit(options: TenantRateLimitOptions): Promise<{ handle: RunHandle; queen: Queen }> {
  const { url } = options;
  const queen = new Queen({ url });
  const handle = await Stream.from(queen.queue(options.source ?? 'api-requests.by-tenant'))
    .gate(tokenBucket({ capacity: options.capacity ?? 10, refillPerSecond: options.refillPerSecond ?? 20, maxWaitMs: options.maxWaitMs ?? 1000 }))
    .to(queen.queue(options.sink ?? 'api-admitted'))
    .run({
      queryId: options.queryId ?? 'api-tenant-rate-limit',
      url,
      batchSize: options.batchSize ?? 20,
      maxPartitions: options.maxPartitions,
      onError: options.onError,
    });
  return { handle, queen };
}

/** The producer side: a request goes to its tenant's partition. */
export async function submitRequest(queen: Queen, tenant: string, request: unknown, source = 'api-requests.by-tenant'): Promise<void> {
  await queen.queue(source).partition(tenant).push({ payload: request });
}
