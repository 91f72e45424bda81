// One seed checked: run it, model the stored input, compare.
import { compare, type Discrepancy } from './compare.js';
import { referenceModel } from './model.js';
import { runSeed } from './run.js';
import { describeVariant, type Variant, type VariantFilter } from './variant.js';

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
  const model = referenceModel(run.variant, run.observed.source);
  const { windowsChecked, discrepancies } = compare(run.variant, model, run.observed);
  return {
    seed,
    variant: run.variant,
    description: describeVariant(run.variant),
    windowsChecked,
    discrepancies,
    messages: run.observed.source.length,
    notes: run.observed.notes,
    elapsedMs: run.elapsedMs,
    replay: replayCommand(seed, filterArgs),
  };
}
