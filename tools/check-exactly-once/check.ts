// One seed checked: run it, model the stored input, compare.
import { compare, type Discrepancy } from './compare.js';
import { referenceModel } from './model.js';
import { runSeed } from './run.js';
import { describeVariant, type Variant, type VariantFilter } from './variant.js';
import { joinModel, type JoinStored } from './join-model.js';
import { compareJoin } from './join-compare.js';

export interface SeedResult {
  seed: number;
  variant: Variant;
  description: string;
  windowsChecked: number;
  discrepancies: Discrepancy[];
  messages: number;
  notes: string[];
  elapsedMs: number;
  replay: string;
}

/** The command line that replays a seed under the same filters (the filters shape the variant drawn). */
export function replayCommand(seed: number, filterArgs: string[]): string {
  return ['npm run check:exactly-once --', '--seed', String(seed), ...filterArgs].join(' ');
}

export async function checkSeed(seed: number, filter: VariantFilter, adminUrl: string, filterArgs: string[] = []): Promise<SeedResult> {
  const run = await runSeed(seed, filter, adminUrl);
  let windowsChecked: number;
  let discrepancies: Discrepancy[];
  if (run.variant.kind === 'join') {
    const model = joinModel(run.variant, run.observed.source as unknown as JoinStored[], run.observed.right as unknown as JoinStored[]);
    ({ checked: windowsChecked, discrepancies } = compareJoin(model, run.observed.sink, run.observed.joinHeld, run.observed.runError));
  } else {
    const model = referenceModel(run.variant, run.observed.source);
    ({ windowsChecked, discrepancies } = compare(run.variant, model, run.observed));
  }
  return {
    seed,
    variant: run.variant,
    description: describeVariant(run.variant),
    windowsChecked,
    discrepancies,
    messages: run.observed.source.length + run.observed.right.length,
    notes: run.observed.notes,
    elapsedMs: run.elapsedMs,
    replay: replayCommand(seed, filterArgs),
  };
}
