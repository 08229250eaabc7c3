import { describe, expect, it } from 'vitest';
import { CREATURES, ZONES } from './creatures';
import { gridFor, layout, type Rect } from './layout';

const EPS = 1e-6;

const inside = (inner: Rect, outer: Rect): boolean =>
  inner.x >= outer.x - EPS &&
  inner.y >= outer.y - EPS &&
  inner.x + inner.w <= outer.x + outer.w + EPS &&
  inner.y + inner.h <= outer.y + outer.h + EPS;

const disjoint = (a: Rect, b: Rect): boolean =>
  a.x + a.w <= b.x + EPS || b.x + b.w <= a.x + EPS || a.y + a.h <= b.y + EPS || b.y + b.h <= a.y + EPS;

const SIZES: Array<[number, number]> = [
  [320, 240], // small landscape
  [240, 400], // small portrait (phone)
  [1280, 720],
  [1920, 1080],
  [3840, 2160], // large
  [800, 3000], // tall
];

describe.each(SIZES)('layout at %ix%i', (width, height) => {
  const scene = layout(width, height, CREATURES);
  const zoneRect = new Map(scene.zones.map((z) => [z.zone, z]));

  it('has three zone bands in flow order that tile the canvas', () => {
    expect(scene.zones.map((z) => z.zone)).toEqual([...ZONES]);
    const area = scene.zones.reduce((sum, z) => sum + z.rect.w * z.rect.h, 0);
    expect(area).toBeCloseTo(width * height, 3);
    for (const [i, a] of scene.zones.entries()) {
      expect(inside(a.rect, { x: 0, y: 0, w: width, h: height })).toBe(true);
      expect(inside(a.body, a.rect)).toBe(true);
      for (const b of scene.zones.slice(i + 1)) expect(disjoint(a.rect, b.rect)).toBe(true);
    }
  });

  it("places every creature once (the design's 27 and the project's own), with per-zone counts", () => {
    expect(scene.placements).toHaveLength(CREATURES.length);
    expect(new Set(scene.placements.map((p) => p.creature.name)).size).toBe(CREATURES.length);
    for (const z of scene.zones) {
      expect(z.count).toBe(scene.placements.filter((p) => p.creature.zone === z.zone).length);
    }
  });

  it('keeps every creature (body, cell and label) inside its own zone', () => {
    for (const p of scene.placements) {
      const body = zoneRect.get(p.creature.zone)?.body;
      expect(body).toBeDefined();
      if (!body) continue;
      expect(p.r).toBeGreaterThan(1);
      expect(inside(p.cell, body)).toBe(true);
      expect(inside({ x: p.x - p.r, y: p.y - p.r, w: 2 * p.r, h: 2 * p.r }, p.cell)).toBe(true);
      if (p.label) expect(inside(p.label, p.cell)).toBe(true);
    }
  });

  it('never overlaps two creatures', () => {
    const ps = scene.placements;
    for (let i = 0; i < ps.length; i++) {
      for (let j = i + 1; j < ps.length; j++) {
        const a = ps[i]!;
        const b = ps[j]!;
        expect(disjoint(a.cell, b.cell)).toBe(true);
        expect(Math.hypot(a.x - b.x, a.y - b.y)).toBeGreaterThanOrEqual(a.r + b.r);
      }
    }
  });

  it('is deterministic', () => {
    expect(layout(width, height, CREATURES)).toEqual(scene);
    expect(layout(width, height, [...CREATURES])).toEqual(scene);
  });
});

describe('layout edge cases', () => {
  it('uses columns on landscape and rows on portrait canvases', () => {
    expect(layout(1200, 800, CREATURES).orientation).toBe('columns');
    expect(layout(400, 900, CREATURES).orientation).toBe('rows');
  });

  it('labels creatures on roomy canvases and drops labels on cramped ones', () => {
    expect(layout(1920, 1080, CREATURES).placements.every((p) => p.label)).toBe(true);
    expect(layout(160, 120, CREATURES).placements.some((p) => p.label === null)).toBe(true);
  });

  it('caps creature size on huge canvases', () => {
    const big = layout(7680, 4320, CREATURES);
    expect(Math.max(...big.placements.map((p) => p.r))).toBeLessThanOrEqual(26);
  });

  it('survives a zero-sized or invalid canvas without NaN', () => {
    for (const [w, h] of [
      [0, 0],
      [-5, 10],
      [Number.NaN, 100],
    ] as const) {
      const scene = layout(w, h, CREATURES);
      expect(scene.placements).toHaveLength(CREATURES.length);
      for (const p of scene.placements) {
        expect([p.x, p.y, p.r].every(Number.isFinite)).toBe(true);
      }
    }
  });

  it('chooses near-square grids', () => {
    expect(gridFor(9, 300, 300)).toEqual({ cols: 3, rows: 3 });
    expect(gridFor(5, 500, 100)).toEqual({ cols: 5, rows: 1 });
    expect(gridFor(0, 100, 100)).toEqual({ cols: 1, rows: 1 });
  });
});

describe('layout with the memory zone (the sea floor)', () => {
  it.each([
    [1280, 720],
    [1920, 1080],
    [400, 900],
  ])('at %ix%i: zones above, memory below, together tiling the canvas', (w, h) => {
    const scene = layout(w, h, CREATURES, { memory: true });
    const memory = scene.memory;
    expect(memory).not.toBeNull();
    if (!memory) return;
    const zonesArea = scene.zones.reduce((sum, z) => sum + z.rect.w * z.rect.h, 0);
    expect(zonesArea + memory.rect.w * memory.rect.h).toBeCloseTo(w * h, 3);
    for (const z of scene.zones) expect(z.rect.y + z.rect.h).toBeLessThanOrEqual(memory.rect.y + EPS);
    for (const p of scene.placements) expect(p.cell.y + p.cell.h).toBeLessThanOrEqual(memory.rect.y + EPS);
    // Three tier bands, L0 (shallow) to L2 (deep), inside the memory, in order.
    expect(memory.tiers.map((t) => t.tier)).toEqual(['L0', 'L1', 'L2']);
    for (const [i, t] of memory.tiers.entries()) {
      expect(inside(t.rect, memory.rect)).toBe(true);
      expect(inside(t.field, t.rect)).toBe(true);
      expect(t.field.h).toBeGreaterThan(10);
      if (i > 0) expect(t.rect.y).toBeGreaterThanOrEqual(memory.tiers[i - 1]!.rect.y + memory.tiers[i - 1]!.rect.h - EPS);
    }
  });

  it('is left out when not asked for, or when the canvas is too short for it', () => {
    expect(layout(1280, 720, CREATURES).memory).toBeNull();
    expect(layout(1280, 150, CREATURES, { memory: true }).memory).toBeNull();
    expect(layout(1280, 150, CREATURES, { memory: true }).placements).toHaveLength(CREATURES.length);
  });
});
