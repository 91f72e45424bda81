import { describe, expect, it } from 'vitest';
import { planStages, type StreamStage } from './stream-plan.js';

// The stage-by-stage comparison of two versions of a query (issue 33), as the
// broker answers it on register and plan.

const st = (name: string, kind: string, o: Partial<StreamStage> = {}): StreamStage => ({
  name,
  kind,
  stateful: false,
  feeds_state: false,
  state_hash: null,
  code_hash: 'c',
  ...o,
});
const v1 = [
  st('enrich', 'map', { feeds_state: true }),
  st('window', 'window:tumbling', { stateful: true, state_hash: 'w60' }),
  st('reducer', 'aggregate', { stateful: true, state_hash: 'sum' }),
  st('format', 'map'),
  st('sink', 'sink:queue'),
];
const replace = (name: string, o: Partial<StreamStage>) => v1.map((s) => (s.name === name ? { ...s, ...o } : s));
const changes = (p: ReturnType<typeof planStages>) => Object.fromEntries(p.stages.map((s) => [s.name, [s.change, s.state_action]]));

describe('planStages', () => {
  it('the same chain: same, every row kept', () => {
    const p = planStages(v1, v1, 7);
    expect(p.verdict).toBe('same');
    expect(changes(p)).toMatchObject({ window: ['unchanged', 'keep'], reducer: ['unchanged', 'keep'] });
  });

  it('a stage after the state changed its code or was added: safe', () => {
    expect(planStages(v1, replace('format', { code_hash: 'c2' }), 7).verdict).toBe('safe');
    const added = [...v1.slice(0, 4), st('tag', 'map'), v1[4]!];
    const p = planStages(v1, added, 7);
    expect(p.verdict).toBe('safe');
    expect(changes(p).tag).toEqual(['added', 'none']);
  });

  it('a stage before the state, or the reducer\'s own code: keep-state', () => {
    const p = planStages(v1, replace('enrich', { code_hash: 'c2' }), 7);
    expect(p.verdict).toBe('keep-state');
    expect(changes(p).enrich).toEqual(['state-compatible', 'none']);
    expect(planStages(v1, replace('reducer', { code_hash: 'c2' }), 7).verdict).toBe('keep-state');
    expect(planStages(v1, [st('drop-tests', 'filter', { feeds_state: true }), ...v1], 7).verdict).toBe('keep-state');
  });

  it('a window of another size: blocked, every stateful stage drops the rows; with a migration, keep-state and migrate', () => {
    const wider = replace('window', { state_hash: 'w120' });
    const p = planStages(v1, wider, 7);
    expect(p.verdict).toBe('blocked');
    expect(p.blocking).toEqual(['window']);
    expect(changes(p)).toMatchObject({ window: ['state-incompatible', 'drop'], reducer: ['unchanged', 'drop'] });
    const m = planStages(v1, wider, 7, new Set(['window']));
    expect(m.verdict).toBe('keep-state');
    expect(changes(m).window).toEqual(['state-incompatible', 'migrate']);
    // Without rows there is nothing to lose, but the change still needs consent.
    expect(planStages(v1, wider, 0).verdict).toBe('keep-state');
  });

  it('a stateful stage removed while it holds rows: blocked', () => {
    const p = planStages(v1, [v1[0]!, v1[3]!, v1[4]!], 3);
    expect(p.verdict).toBe('blocked');
    expect(p.blocking).toEqual(['window', 'reducer']);
    expect(changes(p).window).toEqual(['removed', 'drop']);
  });
});
