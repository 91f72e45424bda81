import { Counter, type Registry } from 'prom-client';

interface Tally<L extends string> {
  labels: Record<L, string>;
  value: number;
}

/**
 * A counter labelled by queue whose scrape shows only the `topN()` label sets
 * with the largest counts. Every count is kept (one map entry per label set,
 * an add on the hot path), but /metrics grows with N, not with the number of
 * queues this broker has served: a broker with 10,000 queues answers a
 * bounded scrape. A label set's value is its full count since the broker
 * started, so a series that enters the top N later still reads as a
 * monotonic counter.
 */
export class TopCounter<L extends string> {
  private readonly tallies = new Map<string, Tally<L>>();
  private readonly labelNames: L[];

  constructor(options: { name: string; help: string; labelNames: L[]; registers: Registry[]; topN: number }) {
    this.labelNames = options.labelNames;
    const tallies = this.tallies;
    const { topN } = options;
    new Counter({
      name: options.name,
      help: `${options.help}; the ${topN} largest (QUEEN_METRICS_TOP_N)`,
      labelNames: options.labelNames,
      registers: options.registers,
      collect() {
        this.reset();
        for (const t of largest(tallies.values(), topN)) this.inc(t.labels, t.value);
      },
    });
  }

  inc(labels: Record<L, string>, n = 1): void {
    const key = this.key(labels);
    const tally = this.tallies.get(key);
    if (tally) tally.value += n;
    else this.tallies.set(key, { labels, value: n });
  }

  /** The full count of one label set (0 when never counted), shown on /metrics or not. */
  value(labels: Record<L, string>): number {
    return this.tallies.get(this.key(labels))?.value ?? 0;
  }

  private key(labels: Record<L, string>): string {
    return this.labelNames.map((l) => labels[l]).join('\u0000');
  }
}

/** The `n` tallies with the largest values, largest first (ties in first-counted order). */
function largest<L extends string>(tallies: Iterable<Tally<L>>, n: number): Tally<L>[] {
  if (n <= 0) return [];
  return [...tallies].sort((a, b) => b.value - a.value).slice(0, n);
}
