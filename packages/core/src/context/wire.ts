import type { cycleAck, cycleKvRead, cycleSourceAck, cycleBody, migrationClaimBody, migrationCommitBody, cycleResponse, pushItem, stateGetBody, stateOp, stateRow, streamRegisterBody, streamRegisterResponse, z } from '@queen-mq/protocol';

/**
 * The streams routes' bodies (PROTOCOL §7) as the runner sends and reads
 * them: taken from `@queen-mq/protocol`'s schemas (what the runner sends is
 * the schema's input, what it reads the output), never restated here.
 */

export type StateOp = z.input<typeof stateOp>;
export type CyclePushItem = z.input<typeof pushItem>;
export type CycleAck = z.input<typeof cycleAck>;
/** A join's source ack on a partition of its own (§7.4 extension). */
export type CycleSourceAckWire = z.input<typeof cycleSourceAck>;
/** A lookup's KV read (§7.4 extension). */
export type CycleKvReadWire = z.input<typeof cycleKvRead>;
/** POST /streams/v1/cycle body (§7.4). */
export type CycleRequest = z.input<typeof cycleBody>;
export type CycleResponse = z.output<typeof cycleResponse>;
/** POST /streams/v1/state/get body (§7.5). */
export type StateGetRequest = z.input<typeof stateGetBody>;
/** A state row; `value` is the JSON the runner wrote (the folds read its fields). */
export type StateRow = Omit<z.output<typeof stateRow>, 'value' | 'updated_at'> & { value: any; updated_at?: string };
/** POST /streams/v1/queries body and answer (§7.1). */
export type RegisterRequest = z.input<typeof streamRegisterBody>;
export type RegisterResponse = z.output<typeof streamRegisterResponse>;
/** POST /streams/v1/migrations/claim and commit bodies (issue 33). */
export type MigrationClaimRequest = z.input<typeof migrationClaimBody>;
export type MigrationCommitRequest = z.input<typeof migrationCommitBody>;
