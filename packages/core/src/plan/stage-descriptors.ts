import { createHash } from 'node:crypto';
import type { StreamStage } from '@queen-mq/protocol';
import type { Json } from './plugins.js';
import { chainStructure, type ChainStage } from './chain.js';
import { canonicalJson } from './config-hash.js';
import { chainError } from './chain-error.js';

// Every stage of a chain, described for the registration (issue 33): its
// stable name, whether it holds state, a hash of what decides its state's
// meaning and a hash of its code. The broker compares two versions of a
// query with these, stage by stage (@queen-mq/protocol's planStages).

const hash = (value: Json): string => createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, 16);

/** The kind a derived name is made of: a window, its reducer and a sink by role (one of each per chain). */
function roleOf(s: ChainStage): { kind: string; role: string } {
  switch (s.type) {
    case 'pipe':
      return { kind: s.stage.kind, role: s.stage.kind };
    case 'window':
      return { kind: `window:${s.plugin.kind}`, role: 'window' };
    case 'reduce':
      return { kind: s.reducer.kind, role: 'reducer' };
    case 'sink':
      return { kind: `sink:${s.sink.kind}`, role: 'sink' };
    case 'join':
      return { kind: `join:${s.options.type}`, role: 'join' };
    case 'lookup':
      return { kind: 'lookup', role: 'lookup' };
  }
}

const isStateful = (s: ChainStage): boolean => s.type === 'window' || s.type === 'reduce' || s.type === 'join' || (s.type === 'pipe' && s.stage.kind === 'gate');

/** The chain's stages with names given or derived (`map-1`, `window`, `reducer`, `gate`, `sink`); two stages may not share a name. */
export function describeStages(chain: readonly ChainStage[]): StreamStage[] {
  const structure = chainStructure(chain) as Json[];
  const firstStateful = chain.findIndex(isStateful);
  // What a state row's key means: the key extractor's presence is part of every stateful stage's state.
  const keyed = chain.some((s) => s.type === 'pipe' && s.stage.kind === 'keyBy');
  const ranks = new Map<string, number>();
  const names = new Set<string>();
  return chain.map((s, i) => {
    const { kind, role } = roleOf(s);
    const rank = (ranks.get(role) ?? 0) + 1;
    ranks.set(role, rank);
    const derived = role === 'window' || role === 'reducer' || role === 'sink' || role === 'gate' || role === 'join' ? role : `${role}-${rank}`;
    const name = s.name ?? derived;
    if (names.has(name)) throw chainError(`two stages are named "${name}": give one of them another { name }`);
    names.add(name);
    const stateful = isStateful(s);
    return {
      name,
      kind,
      stateful,
      feeds_state: !stateful && firstStateful >= 0 && i < firstStateful,
      state_hash: stateful ? hash({ stage: structure[i]!, keyed, ...(s.type === 'window' ? { tag: s.tag } : {}) }) : null,
      code_hash: hash({ structure: structure[i]!, code: s.code }),
    };
  });
}
