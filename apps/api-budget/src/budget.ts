import { Queen, Stream, type RunHandle } from 'queen-mq';

/** Options of {@link runApiBudget}; the defaults are the seed's. */
export interface ApiBudgetOptions {
  url: string;
  /** Source queue of API requests. Default `api-requests`. */
  source?: string;
  /** Where admitted requests go. Default `api-allowed`. */
  sink?: string;
  /** Stream query name. Default `api-budget`. */
  queryId?: string;
  /** Requests admitted per key, ever (no refill). Default 10. */
  budget?: number;
  /** Messages per pop. Default 200. */
  batchSize?: number;
  onError?: (error: Error) => void;
}

/**
 * The seed's fixed budget: each key (the source partition) may pass `budget`
 * requests, ever. Once spent, the next request is denied: the allowed prefix
 * is acked, the denied tail stays leased and keeps coming back in order when
 * the lease expires — deferred, never dropped, never charged as a failure.
 */
export async function runApiBudget(options: ApiBudgetOptions): Promise<{ handle: RunHandle; queen: Queen }> {
  const { url } = options;
  const budget = options.budget ?? 10;
  const queen = new Queen({ url });
  const handle = await Stream.from(queen.queue(options.source ?? 'api-requests'))
    .gate((_req, ctx) => {
      ctx.state.remaining ??= budget;
      if (ctx.state.remaining < 1) return false;
      ctx.state.remaining -= 1;
      return true;
    })
    .to(queen.queue(options.sink ?? 'api-allowed'))
    .run({ queryId: options.queryId ?? 'api-budget', url, batchSize: options.batchSize, onError: options.onError });
  return { handle, queen };
}
