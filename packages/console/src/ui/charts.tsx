import type { HistoryRange } from '@queen-mq/protocol';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

/** One line of a chart: its label, its values (one per point; null: no value, a gap) and its colour. */
export interface Line {
  label: string;
  values: (number | null)[];
  color: string;
}

const RANGES: [HistoryRange, string][] = [
  ['1h', 'Last hour'],
  ['24h', 'Last day'],
  ['30d', 'Last 30 days'],
];

/** What one point of a range spans, for the charts' titles. */
export const perStep: Record<HistoryRange, string> = { '1h': 'per minute', '24h': 'per 5 minutes', '30d': 'per hour' };

export function RangePicker({ range, onChange }: { range: HistoryRange; onChange: (r: HistoryRange) => void }) {
  return (
    <div class="toolbar" data-testid="range">
      {RANGES.map(([r, label]) => (
        <button class={r === range ? 'primary' : ''} data-range={r} onClick={() => onChange(r)}>
          {label}
        </button>
      ))}
    </div>
  );
}

export const COLORS = ['#4a3aff', '#157f3c', '#0e7490', '#b25e09', '#c0362c', '#7a5af8', '#667085', '#db2777'];

/**
 * A time series chart (uPlot, drawn on a canvas). `times` are the points'
 * starts (ISO-8601). The uPlot instance is kept on the chart's element
 * (`.uplot` property of the `[data-chart]` div), so what it plots can be
 * read back (the browser test reads `data`). Redrawn when the data change,
 * resized with its container.
 */
export function Chart({ id, title, times, lines }: { id: string; title: string; times: string[]; lines: Line[] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = `${lines.map((l) => l.label).join('\u0000')}`;
  useEffect(() => {
    const el = box.current!;
    const width = () => Math.max(320, el.clientWidth || 640);
    const u = new uPlot(
      {
        width: width(),
        height: 200,
        series: [{}, ...lines.map((l) => ({ label: l.label, stroke: l.color, width: 1.5, points: { show: false } }))],
        axes: [{}, { size: 60 }],
        scales: { x: { time: true } },
        legend: { live: true },
      },
      [[], ...lines.map(() => [])] as unknown as uPlot.AlignedData,
      el,
    );
    plot.current = u;
    (el as HTMLDivElement & { uplot?: uPlot }).uplot = u;
    const observer = new ResizeObserver(() => u.setSize({ width: width(), height: 200 }));
    observer.observe(el);
    return () => {
      observer.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [shape]);
  useEffect(() => {
    plot.current?.setData([times.map((t) => Date.parse(t) / 1000), ...lines.map((l) => l.values)] as uPlot.AlignedData);
  });
  return (
    <div class="chart">
      <div class="chart-title">{title}</div>
      <div data-chart={id} ref={box} />
    </div>
  );
}
