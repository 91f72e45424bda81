import { sleep } from '../context/sleep.js';

// run({ maxMessagesPerSecond }) (issue 33): a replay of retained history
// paced so it does not starve live queries on the same PostgreSQL. The pop
// loop asks before each pop how many messages it may take and waits until
// the messages it already took fit the rate: after n messages, the next pop
// goes no earlier than start + n / rate.

/** Pops a second the pacer aims at: a pop takes at most rate / POPS_PER_SECOND messages, so the rate holds within a fifth of a second. */
const POPS_PER_SECOND = 5;

export class Pacer {
  private start = 0;
  private taken = 0;

  constructor(
    private readonly perSecond: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The batch size of the next pop: at most `batchSize`, and at most a fifth of a second's worth (at least 1). */
  batch(batchSize: number): number {
    return Math.max(1, Math.min(batchSize, Math.floor(this.perSecond / POPS_PER_SECOND)));
  }

  /** Waits until the messages taken so far fit the rate (or `signal` aborts). */
  async ready(signal: AbortSignal): Promise<void> {
    if (this.taken === 0) {
      this.start = this.now();
      return;
    }
    const due = this.start + (this.taken * 1000) / this.perSecond;
    const wait = due - this.now();
    if (wait > 0) await sleep(wait, signal);
  }

  /** Counts a pop's messages. */
  took(n: number): void {
    this.taken += n;
  }
}
