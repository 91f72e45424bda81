// The join's model against what the run left: the output queue as a
// multiset of (left, right) ids (each expected output once: none missing,
// none twice, none the model does not know), and the records each
// partition's shard still holds (no more, no fewer: state is bounded).
import type { Discrepancy } from './compare.js';
import type { JoinModel } from './join-model.js';
import type { QueueMessage } from './run.js';

export function compareJoin(model: JoinModel, sink: QueueMessage[], held: Map<string, string[]>, runError?: string): { checked: number; discrepancies: Discrepancy[] } {
  const out: Discrepancy[] = [];
  if (runError) out.push({ what: 'run did not complete', got: runError });
  const count = (list: string[]) => {
    const m = new Map<string, number>();
    for (const x of list) m.set(x, (m.get(x) ?? 0) + 1);
    return m;
  };
  const expected = count(model.outputs);
  const got = count(sink.map((m) => `${m.data?.l}|${m.data?.r ?? 'null'}`));
  for (const [pair, n] of expected) {
    const g = got.get(pair) ?? 0;
    if (g < n) out.push({ what: 'join output missing', key: pair, expected: n, got: g });
    if (g > n) out.push({ what: 'join output duplicated', key: pair, expected: n, got: g });
  }
  for (const [pair, g] of got) if (!expected.has(pair)) out.push({ what: 'join output the model does not know', key: pair, got: g });
  for (const [partition, want] of model.held) {
    const have = [...(held.get(partition) ?? [])].sort();
    if (JSON.stringify(have) !== JSON.stringify(want)) out.push({ what: 'join state holds other records than the model', partition, expected: want, got: have });
  }
  return { checked: model.outputs.length, discrepancies: out };
}
