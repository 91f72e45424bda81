// Model against observation, window by window: every closed window emitted
// once with its count, sum and bounds; nothing emitted twice or out of
// nowhere; late contributions exactly once where onLate sends them; the DLQ
// holding exactly the messages the chain cannot place; no state left for a
// closed window. For the gate: each partition's allowed prefix, in order,
// numbered 1..k, and the budget row at k.
import { CLOSER_KEY } from './schedule.js';
import type { ExpectedLate, ExpectedWindow, ModelResult } from './model.js';
import type { Observed, QueueMessage } from './run.js';
import type { Variant } from './variant.js';

export interface Discrepancy {
  /** What broke, in a few words (the grouping key of the summary). */
  what: string;
  partition?: string;
  key?: string;
  window?: { start: string; end: string };
  expected?: unknown;
  got?: unknown;
  /** What the model knows that may explain it (not part of the verdict). */
  hint?: string;
}

/** A likely cause, from what the model knows of the window: grace-admitted events, or one push's items missing. */
function hintOf(w: ExpectedWindow, got: Emit[]): { hint?: string } {
  const short = w.count - Math.max(0, ...got.map((e) => e.count));
  if (w.graceAdmitted && short > 0 && short <= w.graceAdmitted) return { hint: `short by ${short}; ${w.graceAdmitted} of its events came after the watermark passed its end, within grace` };
  if (w.largestPush && short === w.largestPush && short > 1) return { hint: `short by exactly the ${short} items of one push (stamped at one instant)` };
  return {};
}

export interface Comparison {
  windowsChecked: number;
  discrepancies: Discrepancy[];
}

const iso = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms));
const toMs = (v: unknown) => (typeof v === 'number' ? v : typeof v === 'string' ? Date.parse(v) : NaN);
const windowOf = (start: number, end: number) => ({ start: iso(start), end: iso(end) });

/** A window result as the sink got it. */
type Emit = Pick<ExpectedWindow, 'partition' | 'key' | 'start' | 'end' | 'count' | 'sum'>;

function emitOf(m: QueueMessage): Emit {
  const d = m.data ?? {};
  return { partition: m.partition, key: String(d.key), start: toMs(d.start), end: toMs(d.end), count: d.count, sum: d.sum };
}

export function compare(v: Variant, model: ModelResult, observed: Observed): Comparison {
  const out: Discrepancy[] = [];
  if (observed.runError) out.push({ what: 'run did not complete', got: observed.runError });
  for (const a of model.ambiguous) out.push({ what: 'schedule error: event neither provably on time nor late', got: a });
  if (v.kind === 'gate') return { windowsChecked: compareGate(v, model, observed, out), discrepancies: out };

  const id = (p: string, k: string, start: number) => `${p}|${k}|${start}`;
  const expected = new Map<string, ExpectedWindow>();
  for (const w of model.windows) expected.set(id(w.partition, w.key, w.start), w);
  const lateByWindow = new Map<string, { count: number; sum: number }>();
  for (const l of model.late) {
    const k = id(l.partition, l.key, l.start);
    const t = lateByWindow.get(k) ?? { count: 0, sum: 0 };
    t.count += 1;
    t.sum += l.n;
    lateByWindow.set(k, t);
  }
  const emits = new Map<string, Emit[]>();
  for (const m of observed.sink) {
    const e = emitOf(m);
    emits.set(id(e.partition, e.key, e.start), [...(emits.get(id(e.partition, e.key, e.start)) ?? []), e]);
  }

  let checked = 0;
  for (const [k, w] of expected) {
    if (w.key === CLOSER_KEY) continue; // the closer's own windows stay open by design
    const got = emits.get(k) ?? [];
    const late = v.onLate === 'include' ? lateByWindow.get(k) : undefined;
    const where = { partition: w.partition, key: w.key, window: windowOf(w.start, w.end) };
    if (w.open) {
      if (got.length) out.push({ what: 'window emitted that should still be open', ...where, expected: 'open', got: got.map(({ count, sum }) => ({ count, sum })) });
      continue;
    }
    checked += 1;
    const exact = got.findIndex((e) => e.count === w.count && e.sum === w.sum && e.end === w.end);
    if (got.length === 0) {
      out.push({ what: 'window missing on the sink', ...where, expected: { count: w.count, sum: w.sum }, ...hintOf(w, got) });
      continue;
    }
    if (exact < 0) {
      out.push({ what: 'window emitted with a wrong result', ...where, expected: { count: w.count, sum: w.sum, end: iso(w.end) }, got: got.map((e) => ({ count: e.count, sum: e.sum, end: iso(e.end) })), ...hintOf(w, got) });
      continue;
    }
    const rest = got.filter((_, i) => i !== exact);
    if (late) continue; // the rest is checked against the late contributions below
    if (rest.length) out.push({ what: 'window emitted twice', ...where, expected: { count: w.count, sum: w.sum }, got: got.map(({ count, sum }) => ({ count, sum })) });
  }
  for (const [k, list] of emits) {
    if (expected.has(k) || (v.onLate === 'include' && lateByWindow.has(k))) continue;
    const e = list[0]!;
    out.push({ what: 'window emitted that the model does not know', partition: e.partition, key: e.key, window: windowOf(e.start, e.end), got: list.map(({ count, sum }) => ({ count, sum })) });
  }

  // late contributions
  if (v.onLate === 'include') {
    for (const [k, late] of lateByWindow) {
      checked += 1;
      const w = expected.get(k);
      const got = emits.get(k) ?? [];
      const total = got.reduce((t, e) => ({ count: t.count + e.count, sum: t.sum + e.sum }), { count: 0, sum: 0 });
      const want = { count: late.count + (w && !w.open ? w.count : 0), sum: late.sum + (w && !w.open ? w.sum : 0) };
      if (total.count !== want.count || total.sum !== want.sum) {
        const [partition, key, start] = k.split('|');
        out.push({ what: 'late contributions (onLate include) wrong', partition, key, window: { start: iso(Number(start)), end: '' }, expected: { late, onTime: w && { count: w.count, sum: w.sum } }, got: got.map(({ count, sum }) => ({ count, sum })) });
      }
    }
  } else if (v.onLate === 'sink') {
    checked += compareLateRecords(model.late, observed.late, out);
  }
  if (v.onLate !== 'sink' && observed.late.length) out.push({ what: 'late queue not empty', got: observed.late.length });

  // dead letters
  const dlqGot = new Set(observed.dlq.map((d) => `${d.partition}@${d.offset}`));
  const dlqWant = new Set(model.deadLetters.map((d) => `${d.partition}@${d.offset}`));
  for (const d of dlqWant) if (!dlqGot.has(d)) out.push({ what: 'unusable event time not dead-lettered', got: `${d} is not in the DLQ` });
  for (const d of observed.dlq) if (!dlqWant.has(`${d.partition}@${d.offset}`)) out.push({ what: 'unexpected dead letter', partition: d.partition, got: `${d.partition}@${d.offset}: ${d.errorMessage}` });
  checked += dlqWant.size;

  // state left clean: no row of a window the model says closed
  const graceMs = v.graceS * 1000;
  const openEnds = new Set(model.windows.filter((w) => w.open).map((w) => `${w.partition}|${w.end}`));
  for (const [partition, rows] of observed.state) {
    for (const row of rows) {
      if (row.key === '__wm__') continue;
      const ends: number[] = [row.value?.windowEnd, ...(row.value?.earlier ?? []).map((e: any) => e.windowEnd)].filter((e) => typeof e === 'number');
      for (const end of ends) {
        if (openEnds.has(`${partition}|${end}`)) continue;
        out.push({ what: 'state row left for a closed window', partition, got: { key: row.key, windowEnd: iso(end), grace: graceMs } });
      }
    }
  }
  return { windowsChecked: checked, discrepancies: out };
}

function compareLateRecords(want: ExpectedLate[], got: QueueMessage[], out: Discrepancy[]): number {
  const seen = new Map<string, number>();
  for (const m of got) {
    const d = m.data ?? {};
    const k = `${d.partition}@${d.offset}|${toMs(d.window?.start)}`;
    seen.set(k, (seen.get(k) ?? 0) + 1);
  }
  const wanted = new Set<string>();
  for (const l of want) {
    const k = `${l.partition}@${l.offset}|${l.start}`;
    wanted.add(k);
    const n = seen.get(k) ?? 0;
    if (n !== 1) out.push({ what: n === 0 ? 'late record missing' : 'late record pushed twice', partition: l.partition, key: l.key, window: windowOf(l.start, l.end), expected: `offset ${l.offset} once`, got: n });
  }
  for (const [k, n] of seen) if (!wanted.has(k)) out.push({ what: 'late record the model does not expect', got: `${k} x${n}` });
  return want.length;
}

function compareGate(v: Variant, model: ModelResult, observed: Observed, out: Discrepancy[]): number {
  let checked = 0;
  const sinkBy = new Map<string, QueueMessage[]>();
  for (const m of observed.sink) sinkBy.set(m.partition, [...(sinkBy.get(m.partition) ?? []), m]);
  for (const [partition, allowed] of model.gate!) {
    const got = (sinkBy.get(partition) ?? []).map((m) => ({ n: m.data?.n, seq: m.data?.seq }));
    const want = allowed.map((a, i) => ({ n: a.n, seq: i + 1 }));
    checked += want.length;
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      out.push({ what: got.length > want.length ? 'gate allowed more than its budget' : got.length < want.length ? 'gate allowed less than min(budget, messages)' : 'gate output out of order or misnumbered', partition, expected: { allowed: want.length, first: want.slice(0, 3) }, got: { allowed: got.length, first: got.slice(0, 3) } });
    }
    const rows = (observed.state.get(partition) ?? []).filter((r) => r.key !== '__wm__');
    const used = rows[0]?.value?.used ?? 0;
    if (used !== want.length || rows.length > 1) out.push({ what: 'gate budget row wrong', partition, expected: { used: want.length }, got: rows.map((r) => r.value) });
  }
  for (const p of sinkBy.keys()) if (!model.gate!.has(p)) out.push({ what: 'gate output on a partition with no source message', partition: p });
  if (observed.dlq.length) out.push({ what: 'unexpected dead letter', got: observed.dlq.map((d) => `${d.partition}@${d.offset}`) });
  void v;
  return checked;
}
