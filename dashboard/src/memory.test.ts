import { describe, expect, it } from 'vitest';
import { ANIMATE_WINDOW_MS } from './activity';
import { CREATURE } from './creatures';
import { MemoryModel, MOVE_MS, MOVES_KEPT, parseTierStats } from './memory';
import { makeEvent } from './testing/fixtures';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);

const stats = (changes: unknown[] = []) => ({
  total: 10,
  tiers: {
    L0: { count: 6, low_salience: 1, contradicted: 0, mean_salience: 0.3 },
    L1: { count: 3, low_salience: 0, contradicted: 1, mean_salience: 0.6 },
    L2: { count: 1, low_salience: 0, contradicted: 0, mean_salience: null },
  },
  by_type: { person: { L0: 2, L1: 1, L2: 0 } },
  communities: 2,
  last_run: null,
  recent_changes: changes,
});

const change = (id: number, changedAt: number, from = 'L0', to = 'L1') => ({
  entity_id: id,
  name: `e${id}`,
  type: 'person',
  from_tier: from,
  to_tier: to,
  reason: 'seen in 3 sessions',
  changed_at: new Date(changedAt).toISOString(),
  run_id: 7,
});

const consolidation = (ts: number, changes: unknown[]) =>
  makeEvent({ creature: CREATURE.SALMON, type: 'metric', ts, data: { run_id: 7, changes: changes as never } });

describe('parseTierStats', () => {
  it('reads the engine’s shape and skips malformed changes', () => {
    const s = parseTierStats(stats([change(1, NOW), { from_tier: 'L9' }, 'junk']));
    expect(s.tiers.L1.count).toBe(3);
    expect(s.tiers.L2.mean_salience).toBeNull();
    expect(s.recent_changes.map((c) => c.entity_id)).toEqual([1]);
  });

  it('counts a missing tier as 0 and rejects a non-object', () => {
    expect(parseTierStats({ tiers: {} }).tiers.L0.count).toBe(0);
    expect(() => parseTierStats(null)).toThrow();
  });
});

describe('MemoryModel', () => {
  it('takes counts from stats; fresh recent changes animate, old ones are only listed', () => {
    const m = new MemoryModel();
    m.applyStats(parseTierStats(stats([change(1, NOW - 5_000), change(2, NOW - ANIMATE_WINDOW_MS - 1)])), NOW);
    expect(m.counts).toEqual({ L0: 6, L1: 3, L2: 1 });
    expect(m.loaded).toBe(true);
    expect(m.moves.map((x) => [x.entityId, x.startedAt])).toEqual([
      [1, NOW],
      [2, null],
    ]);
    expect(m.activeMoves(NOW + MOVE_MS / 2).map((x) => x.move.entityId)).toEqual([1]);
    expect(m.activeMoves(NOW + MOVE_MS)).toEqual([]);
  });

  it('a fresh consolidation metric moves entities between tiers and shifts the counts', () => {
    const m = new MemoryModel();
    m.applyStats(parseTierStats(stats()), NOW);
    const added = m.applyEvent(
      consolidation(NOW, [
        { id: 1, name: 'Priya', type: 'person', from: 'L0', to: 'L1', reason: 'validated' },
        { id: 2, name: 'Lisbon', type: 'place', from: 'L1', to: 'L2', reason: 'pattern' },
        { id: 3, name: 'bad', from: 'L0', to: 'L7' },
        { id: 4, name: 'same', from: 'L1', to: 'L1' },
      ]),
      NOW,
    );
    expect(added).toBe(2);
    expect(m.counts).toEqual({ L0: 5, L1: 3, L2: 2 });
    expect(m.moves.map((x) => `${x.name} ${x.from}>${x.to}`)).toEqual(['Lisbon L1>L2', 'Priya L0>L1']);
  });

  it('the same change from the event and from stats is one move, counted once', () => {
    const m = new MemoryModel();
    m.applyStats(parseTierStats(stats()), NOW);
    m.applyEvent(consolidation(NOW, [{ id: 1, name: 'e1', from: 'L0', to: 'L1' }]), NOW);
    m.applyStats(parseTierStats(stats([change(1, NOW)])), NOW + 100);
    expect(m.moves).toHaveLength(1);
    expect(m.counts.L1).toBe(3); // the engine's count wins
  });

  it('an old consolidation event lists its moves without animating or counting them', () => {
    const m = new MemoryModel();
    m.applyEvent(consolidation(NOW - ANIMATE_WINDOW_MS - 1, [{ id: 1, from: 'L0', to: 'L1' }]), NOW);
    expect(m.moves[0]?.startedAt).toBeNull();
    expect(m.counts).toEqual({ L0: 0, L1: 0, L2: 0 });
  });

  it('ignores other creatures, keeps MOVES_KEPT moves, and can skip moves from stats', () => {
    const m = new MemoryModel();
    expect(m.applyEvent(makeEvent({ creature: CREATURE.PHOENIX, type: 'metric', data: { changes: [] } }), NOW)).toBe(0);
    for (let i = 0; i < MOVES_KEPT + 3; i++) m.applyEvent(consolidation(NOW, [{ id: i, from: 'L0', to: 'L1' }]), NOW);
    expect(m.moves).toHaveLength(MOVES_KEPT);
    const fresh = new MemoryModel();
    fresh.applyStats(parseTierStats(stats([change(1, NOW)])), NOW, NOW, false);
    expect(fresh.moves).toEqual([]);
    expect(fresh.counts.L0).toBe(6);
    m.reset();
    expect(m.moves).toEqual([]);
    expect(m.loaded).toBe(false);
  });
});
