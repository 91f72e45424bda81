import { describe, expect, it } from 'vitest';
import { BrokerClock } from './broker-clock.js';

// The runner's estimate of the broker's clock: never ahead of what the
// samples prove, and it follows a local clock that steps.

function clockAt() {
  const c = { local: 0 };
  return { c, clock: new BrokerClock(() => c.local) };
}

describe('BrokerClock', () => {
  it('before any sample it is the local clock, and says it is not synced', () => {
    const { c, clock } = clockAt();
    c.local = 5_000;
    expect(clock.synced).toBe(false);
    expect(clock.now()).toBe(5_000);
  });

  it('keeps the largest lower bound: a stale sample (an old backlog message) does not pull it back', () => {
    const { c, clock } = clockAt();
    clock.observe(31_000, 1_000); // broker 30 s ahead
    clock.observe(20_000, 2_000); // an old message popped later: a weaker bound
    c.local = 3_000;
    expect(clock.synced).toBe(true);
    expect(clock.offsetMs()).toBe(30_000);
    expect(clock.now()).toBe(33_000);
  });

  it('a runner clock 30 s ahead is corrected to the broker, not beyond it', () => {
    const { c, clock } = clockAt();
    // The broker stamped 100_000; the pop answered when the local clock read 130_050.
    clock.observe(100_000, 130_050);
    c.local = 131_050;
    expect(clock.now()).toBe(101_000);
  });

  it('follows a local clock that stepped forward once its older samples age out (two 30 s buckets)', () => {
    const { c, clock } = clockAt();
    clock.observe(1_000, 0); // offset 1000
    clock.observe(41_000, 50_000); // the local clock stepped 10 s forward: offset −9000, a new bucket
    expect(clock.offsetMs()).toBe(1_000); // the previous bucket still counts
    clock.observe(81_000, 90_000); // another bucket: the pre-step samples are gone
    c.local = 90_000;
    expect(clock.offsetMs()).toBe(-9_000);
    expect(clock.now()).toBe(81_000);
  });

  it('ignores unusable samples (an unparseable createdAt or Date header)', () => {
    const { clock } = clockAt();
    clock.observe(Number.NaN, 0);
    clock.observe(Date.parse('not a date'), 0);
    expect(clock.synced).toBe(false);
  });
});
