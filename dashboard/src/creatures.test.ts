import { describe, expect, it } from 'vitest';
import { countByZone, CREATURES, parseCreatures, ZONES } from './creatures';

describe('creature registry (generated from Python)', () => {
  it('has 27 creatures in 3 zones', () => {
    expect(CREATURES).toHaveLength(27);
    expect(new Set(CREATURES.map((c) => c.zone))).toEqual(new Set(ZONES));
    const counts = countByZone(CREATURES);
    expect(counts.listening + counts.thinking + counts.acting).toBe(27);
  });

  it('rejects an unknown zone, a duplicate and a missing field', () => {
    const ok = { name: 'x', zone: 'thinking', service: 's', process: 'p', description: 'd' };
    expect(parseCreatures([ok])).toHaveLength(1);
    expect(() => parseCreatures([{ ...ok, zone: 'sleeping' }])).toThrow(/unknown zone/);
    expect(() => parseCreatures([ok, ok])).toThrow(/duplicate/);
    expect(() => parseCreatures([{ name: 'x', zone: 'thinking' }])).toThrow(/service/);
    expect(() => parseCreatures({})).toThrow(/list/);
  });
});
