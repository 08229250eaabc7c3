import { describe, expect, it } from 'vitest';
import { checkNames, countByZone, CREATURE, CREATURES, parseCreatures, ZONES } from './creatures';

describe('creature registry (generated from Python)', () => {
  it("has the design's 27 and the project's own, in 3 zones", () => {
    expect(CREATURES.filter((c) => c.origin === 'design')).toHaveLength(27);
    expect(CREATURES.filter((c) => c.origin === 'project').length).toBeGreaterThan(0);
    expect(new Set(CREATURES.map((c) => c.zone))).toEqual(new Set(ZONES));
    const counts = countByZone(CREATURES);
    expect(counts.listening + counts.thinking + counts.acting).toBe(CREATURES.length);
  });

  it("keeps the design's zone, service and process (the design's emit example)", () => {
    const serpent = CREATURES.find((c) => c.name === CREATURE.SERPENT);
    expect(serpent).toMatchObject({ zone: 'acting', service: 'annie-voice', process: 'whisper-stt-annie', origin: 'design' });
  });

  it('names every creature in CREATURE, and only those', () => {
    expect(new Set(Object.values(CREATURE))).toEqual(new Set(CREATURES.map((c) => c.name)));
    expect(() => checkNames(CREATURES, [...Object.values(CREATURE), 'yeti'])).toThrow(/missing yeti/);
    expect(() => checkNames(CREATURES, Object.values(CREATURE).slice(1))).toThrow(/extra/);
  });

  it('rejects an unknown zone or origin, a duplicate and a missing field', () => {
    const ok = { name: 'x', zone: 'thinking', service: 's', process: 'p', origin: 'project', description: 'd' };
    expect(parseCreatures([ok])).toHaveLength(1);
    expect(() => parseCreatures([{ ...ok, zone: 'sleeping' }])).toThrow(/unknown zone/);
    expect(() => parseCreatures([{ ...ok, origin: 'seed' }])).toThrow(/unknown origin/);
    expect(() => parseCreatures([ok, ok])).toThrow(/duplicate/);
    expect(() => parseCreatures([{ name: 'x', zone: 'thinking' }])).toThrow(/service/);
    expect(() => parseCreatures({})).toThrow(/list/);
  });
});
