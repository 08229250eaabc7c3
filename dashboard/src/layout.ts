// Pure layout: canvas size + creatures -> zone bands and one position per creature.
// No DOM, no randomness, so it is unit-tested in node and identical on every render.
import { ZONES, type Creature, type Zone } from './creatures';
import { TIERS, type Tier } from './memory';

export interface Rect {
  readonly x: number;
  readonly y: number;
  readonly w: number;
  readonly h: number;
}

export interface ZoneBand {
  readonly zone: Zone;
  /** The whole band. */
  readonly rect: Rect;
  /** Strip at the top of the band for the zone's label. */
  readonly header: Rect;
  /** Where the zone's creatures live (band minus header and padding). */
  readonly body: Rect;
  readonly count: number;
}

export interface Placement {
  readonly creature: Creature;
  /** The grid cell this creature owns; cells never overlap. */
  readonly cell: Rect;
  /** Centre and radius of the creature's body; the whole shape fits in this circle. */
  readonly x: number;
  readonly y: number;
  readonly r: number;
  /** Name label box under the body, inside the cell; null when the cell is too small. */
  readonly label: Rect | null;
}

export interface TierBand {
  readonly tier: Tier;
  readonly rect: Rect;
  /** Where the tier's label goes (left end of the band). */
  readonly label: Rect;
  /** Where its entity dots live (the rest of the band). */
  readonly field: Rect;
}

/** The sea floor under the three zones: the memory, one band per tier, deeper is older. */
export interface MemoryBand {
  readonly rect: Rect;
  readonly header: Rect;
  readonly tiers: readonly TierBand[];
}

export interface Layout {
  readonly width: number;
  readonly height: number;
  /** Side-by-side columns on landscape canvases, stacked rows on portrait ones. */
  readonly orientation: 'columns' | 'rows';
  readonly zones: readonly ZoneBand[];
  readonly placements: readonly Placement[];
  /** Null unless asked for, or when the canvas is too short to spare it. */
  readonly memory: MemoryBand | null;
}

export interface LayoutOptions {
  /** Reserve the sea floor for the memory zone. */
  readonly memory?: boolean;
}

/** The memory zone takes this share of the height, within [MEMORY_MIN_H, MEMORY_MAX_H]. */
export const MEMORY_SHARE = 0.22;
export const MEMORY_MIN_H = 72;
export const MEMORY_MAX_H = 200;

export const HEADER_H = 28;
export const LABEL_H = 14;
export const MAX_R = 26;
const PAD = 8;

const clampSize = (v: number): number => (Number.isFinite(v) && v > 0 ? v : 0);

/** FNV-1a: a stable per-name number, so each creature sits a little off-grid, always the same way. */
export function hash01(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) / 0xffffffff;
}

/** Columns x rows for n cells in w x h, maximising the smaller side of a cell. */
export function gridFor(n: number, w: number, h: number): { cols: number; rows: number } {
  let best = { cols: 1, rows: Math.max(1, n), score: -1 };
  for (let cols = 1; cols <= Math.max(1, n); cols++) {
    const rows = Math.max(1, Math.ceil(n / cols));
    const score = Math.min(w / cols, h / rows);
    if (score > best.score) best = { cols, rows, score };
  }
  return { cols: best.cols, rows: best.rows };
}

function bandRects(width: number, height: number, orientation: Layout['orientation']): Rect[] {
  const n = ZONES.length;
  return ZONES.map((_, i) => {
    if (orientation === 'columns') {
      const x0 = (width * i) / n;
      return { x: x0, y: 0, w: (width * (i + 1)) / n - x0, h: height };
    }
    const y0 = (height * i) / n;
    return { x: 0, y: y0, w: width, h: (height * (i + 1)) / n - y0 };
  });
}

function place(creature: Creature, cell: Rect): Placement {
  // Labels only when the cell is tall enough that the body would still be visible.
  const labelH = cell.h >= 3 * LABEL_H ? LABEL_H : 0;
  const bodyH = cell.h - labelH;
  const r = Math.max(0, Math.min(MAX_R, (Math.min(cell.w, bodyH) / 2) * 0.7));
  // Deterministic jitter within the slack of the cell keeps the scene from looking like a table.
  const slackX = Math.max(0, cell.w - 2 * r);
  const slackY = Math.max(0, bodyH - 2 * r);
  const jx = (hash01(creature.name) - 0.5) * slackX * 0.6;
  const jy = (hash01(`${creature.name}~y`) - 0.5) * slackY * 0.6;
  const x = cell.x + cell.w / 2 + jx;
  const y = cell.y + bodyH / 2 + jy;
  const label = labelH > 0 ? { x: cell.x, y: y + r, w: cell.w, h: labelH } : null;
  return { creature, cell, x, y, r, label };
}

function memoryBand(w: number, top: number, h: number): MemoryBand {
  const rect = { x: 0, y: top, w, h };
  const headerH = Math.min(HEADER_H - 6, h / 4);
  const header = { x: 0, y: top, w, h: headerH };
  const bodyH = h - headerH;
  const labelW = Math.min(150, w * 0.3);
  const tiers = TIERS.map((tier, i) => {
    const y0 = top + headerH + (bodyH * i) / TIERS.length;
    const y1 = top + headerH + (bodyH * (i + 1)) / TIERS.length;
    const band = { x: 0, y: y0, w, h: y1 - y0 };
    return {
      tier,
      rect: band,
      label: { x: 0, y: y0, w: labelW, h: y1 - y0 },
      field: { x: labelW, y: y0, w: Math.max(0, w - labelW), h: y1 - y0 },
    };
  });
  return { rect, header, tiers };
}

export function layout(
  width: number,
  height: number,
  creatures: readonly Creature[],
  options: LayoutOptions = {},
): Layout {
  const w = clampSize(width);
  const h = clampSize(height);
  // The memory needs a useful height, and the zones above it at least as much again.
  const memH = options.memory ? Math.min(MEMORY_MAX_H, Math.max(MEMORY_MIN_H, h * MEMORY_SHARE)) : 0;
  const withMemory = memH > 0 && h >= 3 * memH;
  const zonesH = withMemory ? h - memH : h;
  const orientation = w >= zonesH ? 'columns' : 'rows';
  const zones: ZoneBand[] = [];
  const placements: Placement[] = [];

  bandRects(w, zonesH, orientation).forEach((rect, i) => {
    const zone = ZONES[i] as Zone;
    const members = creatures.filter((c) => c.zone === zone);
    const headerH = Math.min(HEADER_H, rect.h / 4);
    const pad = Math.min(PAD, rect.w / 8, rect.h / 8);
    const header = { x: rect.x, y: rect.y, w: rect.w, h: headerH };
    const body = {
      x: rect.x + pad,
      y: rect.y + headerH,
      w: Math.max(0, rect.w - 2 * pad),
      h: Math.max(0, rect.h - headerH - pad),
    };
    zones.push({ zone, rect, header, body, count: members.length });

    const { cols, rows } = gridFor(members.length, body.w, body.h);
    const cw = body.w / cols;
    const ch = body.h / rows;
    members.forEach((creature, k) => {
      const col = k % cols;
      const row = Math.floor(k / cols);
      placements.push(place(creature, { x: body.x + col * cw, y: body.y + row * ch, w: cw, h: ch }));
    });
  });

  const memory = withMemory ? memoryBand(w, zonesH, memH) : null;
  return { width: w, height: h, orientation, zones, placements, memory };
}
