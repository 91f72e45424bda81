// npm run check:exactly-once -- [--seeds N | --seed S] [filters]
// Runs seeds against one embedded PostgreSQL (a fresh database and broker per
// seed), prints each seed's variant, windows checked and discrepancies (with
// the command that replays it), a summary grouped by cause, and writes the
// whole result as JSON. Exit code 1 when a discrepancy was found.
import { randomInt } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { acquireCluster } from '@queen-mq/testing';
import { checkSeed, replayCommand, type SeedResult } from './check.js';
import { FAULTS, KINDS, type Fault, type GateStyle, type Kind, type OnLate, type TimeDomain, type VariantFilter } from './variant.js';

const usage = `usage: npm run check:exactly-once -- [options]
  --seeds N           run N fresh seeds (default 1)
  --seed S            run seed S only (also: QUEEN_CHECK_SEED=S)
  --kinds LIST        of ${KINDS.join(',')}
  --gate              the gate only (same as --kinds gate)
  --gate-style LIST   mutate,reassign
  --time LIST         processing,event
  --on-late LIST      drop,include,sink
  --grace LIST        grace periods in seconds to draw from (default 0,0,0.5,1)
  --faults LIST       none, or of ${FAULTS.join(',')}
  --bad-event-time yes|no   event time: messages without an event time (they belong in the DLQ)
  --out FILE          JSON result (default check-exactly-once.json)`;

const { values } = parseArgs({
  options: {
    seeds: { type: 'string' },
    seed: { type: 'string' },
    kinds: { type: 'string' },
    gate: { type: 'boolean' },
    'gate-style': { type: 'string' },
    time: { type: 'string' },
    'on-late': { type: 'string' },
    grace: { type: 'string' },
    faults: { type: 'string' },
    'bad-event-time': { type: 'string' },
    out: { type: 'string', default: 'check-exactly-once.json' },
    help: { type: 'boolean' },
  },
});
if (values.help) {
  console.log(usage);
  process.exit(0);
}

function listOf<T extends string>(flag: string, raw: string | undefined, allowed: readonly string[]): T[] | undefined {
  if (raw === undefined) return undefined;
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const i of items) if (!allowed.includes(i)) throw new Error(`--${flag}: unknown "${i}" (one of ${allowed.join(', ')})`);
  return items as T[];
}

const filter: VariantFilter = {
  kinds: values.gate ? ['gate'] : listOf<Kind>('kinds', values.kinds, KINDS),
  time: listOf<TimeDomain>('time', values.time, ['processing', 'event']),
  onLate: listOf<OnLate>('on-late', values['on-late'], ['drop', 'include', 'sink']),
  grace: values.grace === undefined ? undefined : values.grace.split(',').map((g) => {
    const n = Number(g);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--grace: not a number of seconds: "${g}"`);
    return n;
  }),
  gateStyles: listOf<GateStyle>('gate-style', values['gate-style'], ['mutate', 'reassign']),
  faults: values.faults === 'none' ? [] : listOf<Fault>('faults', values.faults, FAULTS),
  badEventTime: values['bad-event-time'] === undefined ? undefined : values['bad-event-time'] === 'yes',
};
// the same filters on the replay line: they shape the variant a seed draws
const filterArgs: string[] = [];
for (const flag of ['kinds', 'gate-style', 'time', 'on-late', 'grace', 'faults', 'bad-event-time'] as const) if (values[flag] !== undefined) filterArgs.push(`--${flag}`, String(values[flag]));
if (values.gate) filterArgs.push('--gate');

const single = values.seed ?? process.env.QUEEN_CHECK_SEED;
const seeds = single !== undefined ? [Number(single)] : Array.from({ length: Number(values.seeds ?? 1) }, () => randomInt(1, 2 ** 31 - 1));
if (seeds.some((s) => !Number.isInteger(s) || s < 0)) throw new Error(`seeds must be non-negative integers: ${seeds.join(', ')}`);

const cluster = await acquireCluster();
const results: SeedResult[] = [];
const began = Date.now();
try {
  for (const [i, seed] of seeds.entries()) {
    let r: SeedResult;
    try {
      r = await checkSeed(seed, filter, cluster.adminUrl, filterArgs);
    } catch (err) {
      r = { seed, variant: undefined as never, description: '(the run failed)', windowsChecked: 0, discrepancies: [{ what: 'checker failed', got: (err as Error).stack }], messages: 0, notes: [], elapsedMs: 0, replay: replayCommand(seed, filterArgs) };
    }
    results.push(r);
    const bad = r.discrepancies.length;
    console.log(`[${i + 1}/${seeds.length}] seed ${seed} | ${r.description} | ${r.messages} messages, ${r.windowsChecked} checked | ${bad ? `${bad} DISCREPANCIES` : 'ok'} | ${(r.elapsedMs / 1000).toFixed(1)} s`);
    for (const d of r.discrepancies.slice(0, 6)) console.log(`    - ${d.what}${d.partition ? ` ${d.partition}` : ''}${d.key ? ` key ${d.key}` : ''}${d.window ? ` [${d.window.start}, ${d.window.end})` : ''}${d.expected !== undefined ? ` expected ${JSON.stringify(d.expected)}` : ''}${d.got !== undefined ? ` got ${JSON.stringify(d.got)}` : ''}${d.hint ? ` (${d.hint})` : ''}`);
    if (bad > 6) console.log(`    … ${bad - 6} more`);
    if (bad) console.log(`    replay: ${r.replay}`);
  }
} finally {
  await cluster.release();
}

// summary: by cause, with the seeds that showed it
const byCause = new Map<string, { count: number; seeds: Set<number>; variants: Set<string> }>();
for (const r of results)
  for (const d of r.discrepancies) {
    const c = byCause.get(d.what) ?? { count: 0, seeds: new Set(), variants: new Set() };
    c.count += 1;
    c.seeds.add(r.seed);
    if (r.variant) c.variants.add(`${r.variant.kind}/${r.variant.time}`);
    byCause.set(d.what, c);
  }
const failed = results.filter((r) => r.discrepancies.length);
console.log(`\n${results.length} seeds in ${((Date.now() - began) / 1000).toFixed(0)} s: ${results.reduce((n, r) => n + r.windowsChecked, 0)} windows/records checked, ${failed.length} seeds with discrepancies`);
for (const [what, c] of [...byCause].sort((a, b) => b[1].count - a[1].count)) console.log(`  ${what}: ${c.count} in ${c.seeds.size} seeds (${[...c.variants].join(', ')}); seeds ${[...c.seeds].slice(0, 8).join(', ')}`);
writeFileSync(values.out!, JSON.stringify({ filter, seeds: results }, null, 2));
console.log(`result: ${values.out}`);
process.exit(failed.length ? 1 : 0);
