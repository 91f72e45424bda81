import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.listing_totals_refresh_v1.sql, beside it.

/** Recounts the listing totals of partitions $1 and of every partition of queues $2. Answers the partitions recounted. */
export const LISTING_TOTALS_REFRESH_SQL: NamedStatement = {
  name: 'queen_listing_totals_refresh',
  text: 'select id from queen.listing_totals_refresh_v1($1::uuid[], $2::text[]) id',
};
