/**
 * Request and response bodies of the streams routes (PROTOCOL §7), as the
 * runner sends and reads them. PROTOCOL.md is the source of truth.
 */

export type StateOp =
  | { type: 'upsert'; key: string; value: unknown; expected_version?: number }
  | { type: 'delete'; key: string; expected_version?: number };

export interface CyclePushItem {
  queue: string;
  partition?: string;
  payload: unknown;
  transactionId?: string;
}

export interface CycleAck {
  transactionId: string;
  leaseId?: string;
  status?: 'completed' | 'success' | 'failed' | 'dlq';
  count?: number;
}

/** POST /streams/v1/cycle body (§7.4). */
export interface CycleRequest {
  query_id: string;
  partition_id: string;
  consumer_group?: string;
  state_ops: StateOp[];
  push_items: CyclePushItem[];
  ack: CycleAck | null;
  release_lease?: boolean;
}

export interface CycleResponse {
  success: boolean;
  query_id: string;
  partition_id: string;
  state_ops_applied?: number;
  state_results?: { key: string; type: string; version: number | null }[];
  push_results?: { status: string; transaction_id: string; message_id: string; offset?: string }[];
  ack_result?: { success: boolean; count: number; lease_released: boolean; dlq: boolean; offset: string } | null;
  error?: string;
  code?: string;
}

/** POST /streams/v1/state/get body (§7.5). */
export interface StateGetRequest {
  query_id: string;
  partition_id: string;
  keys?: string[];
  key_prefix?: string;
  ripe_at_or_before?: number;
  /** Page size (the route's maximum by default). */
  limit?: number;
  /** Only keys bytewise after this one: the previous page's `next_after`. */
  after?: string;
}

export interface StateRow {
  key: string;
  value: any;
  version: number;
  updated_at?: string;
}

export interface StateGetResponse {
  success: boolean;
  rows: StateRow[];
}

/** POST /streams/v1/queries body and answer (§7.1). */
export interface RegisterRequest {
  name: string;
  source_queue: string;
  sink_queue?: string;
  config_hash: string;
  reset?: boolean;
}

export interface RegisterResponse {
  success: boolean;
  query_id: string;
  name: string;
  config_hash: string;
  fresh: boolean;
  reset: boolean;
}
