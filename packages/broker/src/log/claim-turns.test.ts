import { describe, expect, it } from 'vitest';
import type { BrokerContext } from '../context/context.js';
import { claimTurn, noteClaim } from './claim-turns.js';

// The round a fair wildcard pop makes is kept in the broker; pops in flight
// at once are offered the same turn and answer in any order.

const id = (n: number) => `00000000-0000-0000-0000-${String(n).padStart(12, '0')}`;
const claim = (n: number) => [{ partition_id: id(n), weight: 1 }];

describe('claim turns', () => {
  it('pops answering out of order do not move the round back', () => {
    const ctx = {} as BrokerContext;
    noteClaim(ctx, 'q', 'g', claimTurn(ctx, 'q', 'g'), claim(2));
    const turn = claimTurn(ctx, 'q', 'g');
    expect(turn.after).toBe(id(2));
    // Three pops offered the same turn claimed 3, 4 and 5; 5 answers first.
    noteClaim(ctx, 'q', 'g', turn, claim(5));
    noteClaim(ctx, 'q', 'g', turn, claim(3));
    noteClaim(ctx, 'q', 'g', turn, claim(4));
    expect(claimTurn(ctx, 'q', 'g').after).toBe(id(5));
  });

  it('a round that wrapped past the end is further on than the ids it passed', () => {
    const ctx = {} as BrokerContext;
    noteClaim(ctx, 'q', 'g', claimTurn(ctx, 'q', 'g'), claim(8));
    const turn = claimTurn(ctx, 'q', 'g');
    // From 8: 9 comes first, then the round wraps to 1.
    noteClaim(ctx, 'q', 'g', turn, claim(1));
    noteClaim(ctx, 'q', 'g', turn, claim(9));
    expect(claimTurn(ctx, 'q', 'g').after).toBe(id(1));
  });

  it('one pop claiming several partitions moves the round to its last', () => {
    const ctx = {} as BrokerContext;
    noteClaim(ctx, 'q', 'g', claimTurn(ctx, 'q', 'g'), claim(2));
    // From 2, in round order: 3, 6, then wrapped to 1.
    noteClaim(ctx, 'q', 'g', claimTurn(ctx, 'q', 'g'), [...claim(3), ...claim(6), ...claim(1)]);
    expect(claimTurn(ctx, 'q', 'g').after).toBe(id(1));
  });

  it('a partition of weight 3 is owed two more turns, then the round moves on', () => {
    const ctx = {} as BrokerContext;
    noteClaim(ctx, 'q', 'g', claimTurn(ctx, 'q', 'g'), [{ partition_id: id(4), weight: 3 }]);
    expect(claimTurn(ctx, 'q', 'g').again).toEqual([id(4)]);
    noteClaim(ctx, 'q', 'g', claimTurn(ctx, 'q', 'g'), [{ partition_id: id(4), weight: 3 }]);
    noteClaim(ctx, 'q', 'g', claimTurn(ctx, 'q', 'g'), [{ partition_id: id(4), weight: 3 }]);
    expect(claimTurn(ctx, 'q', 'g').again).toBeNull();
    expect(claimTurn(ctx, 'q', 'g').after).toBe(id(4));
  });
});
