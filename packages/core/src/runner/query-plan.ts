import { Queen } from '@queen-mq/client';
import type { streamPlanResponse, z } from '@queen-mq/protocol';
import type { CompiledQuery } from '../plan/compile.js';

/** Where `stream.plan()` asks: the broker and the query's name, as `run()` takes them. */
export interface PlanOptions {
  queryId: string;
  url: string;
  bearerToken?: string;
}

/** The broker's answer: the plan per stage, its verdict, and the query's live state rows. */
export type QueryPlan = z.output<typeof streamPlanResponse>;

/** POST /streams/v1/queries/plan with the compiled chain's stages; changes nothing but the proposed version. */
export async function planQuery(compiled: CompiledQuery, options: PlanOptions): Promise<QueryPlan> {
  const queen = new Queen({ url: options.url, bearerToken: options.bearerToken });
  try {
    return await queen.api.streamsPlan({
      body: {
        name: options.queryId,
        config_hash: compiled.configHash,
        stages: [...compiled.stages],
        migrate: compiled.migration ? [compiled.migration.stage] : [],
      },
    });
  } finally {
    await queen.close();
  }
}
