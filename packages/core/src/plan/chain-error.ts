import { QueenError } from '@queen-mq/protocol';

/**
 * A chain that cannot run. Thrown synchronously by the builder call that
 * makes the chain invalid (or by `compile()` for whole-chain rules), before
 * any HTTP request; the code is the catalogue's VALIDATION_FAILED.
 */
export function chainError(message: string): QueenError {
  return new QueenError('VALIDATION_FAILED', message);
}
