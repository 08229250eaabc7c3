import { describe, expect, it } from 'vitest';
import { CREATURE, CREATURES } from './creatures';
import { parseEvent, type AquariumEvent } from './events';
import { parseTierStats, TIERS } from './memory';
import { mulberry32, SyntheticGenerator, syntheticTierStats } from './synthetic';

const START = Date.UTC(2026, 0, 1, 12, 0, 0);

function run(gen: SyntheticGenerator, minutes: number, stepMs = 250): AquariumEvent[] {
  const out: AquariumEvent[] = [];
  for (let t = START; t <= START + minutes * 60_000; t += stepMs) out.push(...gen.tick(t));
  return out;
}

describe('mulberry32', () => {
  it('is deterministic per seed and stays in [0, 1)', () => {
    const a = mulberry32(42);
    const b = mulberry32(42);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(xs).toEqual(Array.from({ length: 1000 }, () => b()));
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(mulberry32(43)()).not.toBe(xs[0]);
  });
});

describe('SyntheticGenerator (the demo)', () => {
  const events = run(new SyntheticGenerator({ seed: 7 }), 20);

  it('is deterministic for a seed and the same clock', () => {
    expect(run(new SyntheticGenerator({ seed: 7 }), 20)).toEqual(events);
    expect(run(new SyntheticGenerator({ seed: 8 }), 20)).not.toEqual(events);
  });

  it('emits valid events of the contract, each marked as demo', () => {
    expect(events.length).toBeGreaterThan(200);
    for (const e of events) {
      const { ts: _ts, origin: _origin, ...wire } = e;
      expect(parseEvent(JSON.parse(JSON.stringify(wire)), 'demo')).toEqual(e);
      expect(e.origin).toBe('demo');
      expect(e.data['demo']).toBe(true);
    }
    expect(new Set(events.map((e) => e.event_id)).size).toBe(events.length);
  });

  it('never emits an event before its time, and in time order', () => {
    const gen = new SyntheticGenerator({ seed: 3 });
    let last = -Infinity;
    for (let t = START; t <= START + 5 * 60_000; t += 333) {
      for (const e of gen.tick(t)) {
        expect(e.ts).toBeLessThanOrEqual(t);
        expect(e.ts).toBeGreaterThanOrEqual(last);
        last = e.ts;
      }
    }
  });

  it('brings every creature to life and shows every kind of event, errors sometimes', () => {
    expect(new Set(events.map((e) => e.creature))).toEqual(new Set(CREATURES.map((c) => c.name)));
    const types = new Map<string, number>();
    for (const e of events) types.set(e.event_type, (types.get(e.event_type) ?? 0) + 1);
    expect([...types.keys()].sort()).toEqual(['complete', 'error', 'metric', 'start']);
    expect(types.get('error')! / events.length).toBeLessThan(0.1);
  });

  it('starts come before their completes within a flow', () => {
    const open = new Map<string, number>();
    for (const e of events) {
      const key = `${e.creature}|${e.session_id ?? ''}`;
      if (e.event_type === 'start') open.set(key, e.ts);
      if (e.event_type === 'complete' && open.has(key)) expect(open.get(key)!).toBeLessThanOrEqual(e.ts);
    }
  });

  it('moves entities between tiers through the consolidation creature\'s metric events', () => {
    const moves = events.filter((e) => e.creature === CREATURE.SALMON && e.event_type === 'metric');
    expect(moves.length).toBeGreaterThan(0);
    for (const e of moves) {
      const changes = e.data['changes'] as Array<Record<string, unknown>>;
      expect(changes.length).toBeGreaterThan(0);
      for (const c of changes) {
        expect(TIERS).toContain(c['from']);
        expect(TIERS).toContain(c['to']);
        expect(c['from']).not.toBe(c['to']);
      }
    }
  });

  it('errorRate 0 never fails a flow; errorRate 1 fails every flow that has steps', () => {
    const calm = run(new SyntheticGenerator({ seed: 5, errorRate: 0 }), 10);
    // Only the chores' deliberate auth error may remain.
    expect(calm.filter((e) => e.event_type === 'error').every((e) => e.creature === CREATURE.BASILISK)).toBe(true);
    const stormy = run(new SyntheticGenerator({ seed: 5, errorRate: 1 }), 10);
    expect(stormy.filter((e) => e.event_type === 'error').length).toBeGreaterThan(calm.filter((e) => e.event_type === 'error').length);
  });

  it('gives the memory zone plausible tier counts', () => {
    const stats = parseTierStats(syntheticTierStats());
    expect(stats.total).toBe(stats.tiers.L0.count + stats.tiers.L1.count + stats.tiers.L2.count);
  });
});
