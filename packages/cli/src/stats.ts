import { historyRange, type HistoryOverview, type HistoryPoint, type HistoryQueue, type HistoryRange } from '@queen-mq/protocol';
import { str, type CommandSpec } from './command.js';
import { EXIT } from './exit.js';
import { printTable } from './output.js';
import { UsageError } from './usage.js';

const BARS = '▁▂▃▄▅▆▇█';

/**
 * One bar per value, at most `width` bars (longer series show the largest
 * value of each run of points), scaled to the largest value; the lowest bar
 * everywhere when every value is 0.
 */
function sparkline(values: number[], width = 60): string {
  const per = Math.max(1, Math.ceil(values.length / width));
  const runs: number[] = [];
  for (let i = 0; i < values.length; i += per) runs.push(Math.max(...values.slice(i, i + per)));
  const max = Math.max(0, ...runs);
  return runs.map((v) => (max === 0 ? BARS[0] : BARS[Math.min(BARS.length - 1, Math.round((v / max) * (BARS.length - 1)))])).join('');
}

const COUNTS = ['pushed', 'popped', 'acked', 'failed', 'deadLettered'] as const;
const SAMPLES = ['lag', 'dlq'] as const;

/**
 * `queen stats [queue]`: a queue's history (every queue's without one) over
 * --range 1h (default), 24h or 30d. On a terminal: per series its total (or,
 * for the sampled lag and DLQ size, the largest and the last sample) and a
 * sparkline, then each consumer group's lag, then the points with anything
 * in them. With --json (or piped): the history route's answer, one line.
 */
export const statsCommand: CommandSpec = {
  options: { range: { type: 'string' } },
  positionals: [0, 1],
  async run({ io, queen, json, args, values }) {
    const asked = str(values.range) ?? '1h';
    const parsed = historyRange.safeParse(asked);
    if (!parsed.success) throw new UsageError(`--range must be 1h, 24h or 30d, got "${asked}"`);
    const range: HistoryRange = parsed.data;
    const queue = args[0];
    const detail: HistoryQueue | undefined = queue ? await queen.api.historyQueue({ params: { queue }, query: { range } }) : undefined;
    const answer: HistoryQueue | HistoryOverview = detail ?? (await queen.api.historyOverview({ query: { range } }));
    if (json) {
      io.stdout.write(`${JSON.stringify(answer)}\n`);
      return EXIT.OK;
    }
    const points: HistoryPoint[] = answer.points;
    io.stdout.write(`${queue ? `queue ${queue}` : 'every queue'}: ${points.length} points of ${answer.step} s, ${answer.from} to ${answer.to}\n\n`);
    const rows: Record<string, unknown>[] = [
      ...COUNTS.map((f) => {
        const v = points.map((p) => p[f]);
        return { series: f, total: v.reduce((s, x) => s + x, 0), max: Math.max(0, ...v), last: v[v.length - 1], trend: sparkline(v) };
      }),
      ...SAMPLES.map((f) => {
        const v = points.map((p) => p[f]);
        return { series: f === 'lag' ? (queue ? 'depth' : 'lag') : 'dlq entries', total: '', max: Math.max(0, ...v), last: v[v.length - 1], trend: sparkline(v) };
      }),
    ];
    if (detail) {
      for (const g of detail.groups) {
        const v = g.points.map((p) => p.lag);
        rows.push({ series: `lag ${g.group}`, total: '', max: Math.max(0, ...v), last: v[v.length - 1], trend: sparkline(v) });
      }
    }
    printTable(io, ['series', 'total', 'max', 'last', 'trend'], rows);
    const busy = points.filter((p) => COUNTS.some((f) => p[f] > 0) || p.lag > 0 || p.dlq > 0);
    io.stdout.write('\n');
    if (busy.length === 0) io.stdout.write('(nothing counted in this range)\n');
    else printTable(io, ['t', ...COUNTS, ...SAMPLES], busy);
    return EXIT.OK;
  },
};
