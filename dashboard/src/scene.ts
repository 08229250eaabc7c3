// The aquarium on a Canvas 2D: water, the three zones, every creature in its state, and the
// memory on the sea floor. Geometry comes from layout.ts, each creature's look from draw.ts,
// state from activity.ts and memory.ts; this file paints frames and keeps the canvas sharp.
import { Activity, TRAIL_MS } from './activity';
import { countByZone, ZONES, type Creature } from './creatures';
import { drawCreature, fit, ZONE_COLOUR } from './draw';
import { hash01, layout, type Layout, type MemoryBand, type Placement } from './layout';
import { MemoryModel, TIER_LABEL, type Tier } from './memory';

export interface SceneModel {
  readonly activity: Activity;
  readonly memory: MemoryModel;
  /** The scene's "now" (ms) for states: the wall clock live, the virtual clock in the time machine. */
  clock(): number;
  /** The wall clock (ms) for animations (rings, moving dots), which run in real time. */
  realClock(): number;
  /** A banner across the water: "DEMO", "REPLAY", or nothing. */
  banner(): string | null;
  /** The creature picked in the navigator, outlined. */
  highlighted(): string | null;
}

/** Frames per second of the animation; the scene is calm, 30 is plenty and spares CPUs. */
const FPS = 30;
const TIER_COLOUR: Record<Tier, string> = { L0: '#7cc8ff', L1: '#b69cff', L2: '#ffd37a' };
const MAX_DOTS = 48;

function drawWater(ctx: CanvasRenderingContext2D, w: number, h: number): void {
  const g = ctx.createLinearGradient(0, 0, 0, h);
  g.addColorStop(0, '#0b4f6c');
  g.addColorStop(0.55, '#08314a');
  g.addColorStop(1, '#041826');
  ctx.fillStyle = g;
  ctx.fillRect(0, 0, w, h);
}

function drawZones(ctx: CanvasRenderingContext2D, scene: Layout): void {
  for (const band of scene.zones) {
    const { rect, header } = band;
    ctx.fillStyle = `${ZONE_COLOUR[band.zone]}12`; // faint tint, the water stays visible
    ctx.fillRect(rect.x, rect.y, rect.w, rect.h);
    ctx.strokeStyle = `${ZONE_COLOUR[band.zone]}55`;
    ctx.lineWidth = 1;
    ctx.strokeRect(rect.x + 0.5, rect.y + 0.5, Math.max(0, rect.w - 1), Math.max(0, rect.h - 1));
    if (header.h >= 12) {
      ctx.fillStyle = ZONE_COLOUR[band.zone];
      ctx.font = '600 13px system-ui, sans-serif';
      ctx.textAlign = 'left';
      ctx.textBaseline = 'middle';
      ctx.fillText(`${band.zone} · ${band.count}`, header.x + 10, header.y + header.h / 2, header.w - 20);
    }
  }
}

function drawSeaFloor(ctx: CanvasRenderingContext2D, memory: MemoryBand): void {
  const { rect, header } = memory;
  const g = ctx.createLinearGradient(0, rect.y, 0, rect.y + rect.h);
  g.addColorStop(0, '#0a2a3d');
  g.addColorStop(1, '#02090f');
  ctx.fillStyle = g;
  ctx.fillRect(rect.x, rect.y, rect.w, rect.h);
  ctx.strokeStyle = '#5fa8c955';
  ctx.beginPath();
  ctx.moveTo(rect.x, rect.y + 0.5);
  ctx.lineTo(rect.x + rect.w, rect.y + 0.5);
  ctx.stroke();
  if (header.h >= 12) {
    ctx.fillStyle = '#9fd0e3';
    ctx.font = '600 13px system-ui, sans-serif';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    ctx.fillText('memory · tiers', header.x + 10, header.y + header.h / 2);
  }
  for (const band of memory.tiers) {
    ctx.fillStyle = `${TIER_COLOUR[band.tier]}10`;
    ctx.fillRect(band.rect.x, band.rect.y, band.rect.w, band.rect.h);
    ctx.strokeStyle = `${TIER_COLOUR[band.tier]}30`;
    ctx.strokeRect(band.rect.x + 0.5, band.rect.y + 0.5, Math.max(0, band.rect.w - 1), Math.max(0, band.rect.h - 1));
  }
}

/** Deterministic spot for the i-th dot of a tier (dots do not jump around between frames). */
function dotSpot(field: { x: number; y: number; w: number; h: number }, tier: Tier, i: number): { x: number; y: number } {
  const pad = Math.min(6, field.h / 4);
  return {
    x: field.x + pad + hash01(`${tier}:${i}:x`) * Math.max(0, field.w - 2 * pad),
    y: field.y + pad + hash01(`${tier}:${i}:y`) * Math.max(0, field.h - 2 * pad),
  };
}

function drawMemory(ctx: CanvasRenderingContext2D, band: MemoryBand, memory: MemoryModel, real: number, time: number): void {
  for (const t of band.tiers) {
    const count = memory.counts[t.tier];
    const dots = Math.min(MAX_DOTS, count);
    ctx.fillStyle = TIER_COLOUR[t.tier];
    for (let i = 0; i < dots; i++) {
      const s = dotSpot(t.field, t.tier, i);
      const drift = Math.sin(time * 0.6 + i) * 1.2;
      ctx.globalAlpha = 0.75;
      ctx.beginPath();
      ctx.arc(s.x + drift, s.y, Math.max(1.2, Math.min(3, t.field.h / 10)), 0, Math.PI * 2);
      ctx.fill();
    }
    ctx.globalAlpha = 1;
    if (t.label.h >= 10) {
      ctx.fillStyle = TIER_COLOUR[t.tier];
      ctx.font = `${t.label.h >= 16 ? 12 : 10}px system-ui, sans-serif`;
      ctx.textAlign = 'left';
      ctx.textBaseline = 'middle';
      // At most MAX_DOTS dots are drawn; the label carries the true count.
      ctx.fillText(fit(ctx, `${TIER_LABEL[t.tier]} · ${count}`, t.label.w - 12), t.label.x + 10, t.label.y + t.label.h / 2);
    }
  }
  // Entities changing tier: a bright dot swimming from its old band to its new one.
  const byTier = new Map(band.tiers.map((t) => [t.tier, t]));
  for (const { move, t } of memory.activeMoves(real)) {
    const from = byTier.get(move.from);
    const to = byTier.get(move.to);
    if (!from || !to) continue;
    const x = from.field.x + from.field.w * (0.25 + 0.5 * hash01(move.key));
    const y0 = from.rect.y + from.rect.h / 2;
    const y1 = to.rect.y + to.rect.h / 2;
    const ease = t < 0.5 ? 2 * t * t : 1 - (-2 * t + 2) ** 2 / 2;
    const y = y0 + (y1 - y0) * ease;
    ctx.fillStyle = '#ffffff';
    ctx.globalAlpha = 1;
    ctx.beginPath();
    ctx.arc(x, y, 4, 0, Math.PI * 2);
    ctx.fill();
    ctx.strokeStyle = TIER_COLOUR[move.to];
    ctx.lineWidth = 2;
    ctx.stroke();
    ctx.font = '600 11px system-ui, sans-serif';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    ctx.fillText(`${move.name} ${move.from}→${move.to}`, x + 8, y);
  }
  ctx.globalAlpha = 1;
}

function drawBanner(ctx: CanvasRenderingContext2D, scene: Layout, text: string): void {
  ctx.save();
  ctx.font = `800 ${Math.max(18, Math.min(64, scene.width / 14))}px system-ui, sans-serif`;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.fillStyle = '#ffffff14';
  const zonesBottom = scene.memory ? scene.memory.rect.y : scene.height;
  ctx.fillText(text, scene.width / 2, zonesBottom / 2);
  ctx.restore();
}

export interface MountedScene {
  /** The current layout (for hit tests and the test hooks). */
  layout(): Layout;
  /** The creature under a point in CSS pixels of the canvas, if any. */
  creatureAt(x: number, y: number): Creature | null;
  destroy(): void;
}

/**
 * Draw the aquarium into `canvas` and keep it animated and sharp (resize, devicePixelRatio).
 * With prefers-reduced-motion the creatures hold still; states and rings still show.
 */
export function mountScene(canvas: HTMLCanvasElement, creatures: readonly Creature[], model: SceneModel, onLayout?: (scene: Layout) => void): MountedScene {
  // Stable hooks for browser tests, independent of pixels.
  const counts = countByZone(creatures);
  canvas.dataset['creatureCount'] = String(creatures.length);
  for (const zone of ZONES) canvas.setAttribute(`data-zone-${zone}`, String(counts[zone]));

  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('Canvas 2D is not available');
  const reducedMotion = window.matchMedia('(prefers-reduced-motion: reduce)');
  let scene: Layout = layout(0, 0, creatures, { memory: true });
  let background: HTMLCanvasElement | null = null;
  let dpr = 1;

  const resize = (): void => {
    dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    // Backing store in device pixels, drawing in CSS pixels: sharp on HiDPI screens.
    canvas.width = Math.max(1, Math.round(w * dpr));
    canvas.height = Math.max(1, Math.round(h * dpr));
    scene = layout(w, h, creatures, { memory: true });
    canvas.dataset['layout'] = scene.orientation;
    canvas.dataset['memory'] = scene.memory ? 'shown' : 'hidden';
    // The still parts (water, zone bands, sea floor) are painted once per size.
    background = document.createElement('canvas');
    background.width = canvas.width;
    background.height = canvas.height;
    const bg = background.getContext('2d');
    if (bg) {
      bg.setTransform(dpr, 0, 0, dpr, 0, 0);
      drawWater(bg, scene.width, scene.height);
      drawZones(bg, scene);
      if (scene.memory) drawSeaFloor(bg, scene.memory);
    }
    onLayout?.(scene);
    frame(performance.now(), true);
  };

  let last = 0;
  let raf = 0;
  const frame = (t: number, force = false): void => {
    if (!force && t - last < 1000 / FPS - 1) return;
    last = t;
    const now = model.clock();
    const real = model.realClock();
    const time = reducedMotion.matches ? 0 : t / 1000;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    if (background) ctx.drawImage(background, 0, 0);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const banner = model.banner();
    if (banner) drawBanner(ctx, scene, banner);
    const highlighted = model.highlighted();
    for (const p of scene.placements) drawOne(ctx, p, model, now, real, time, highlighted);
    if (scene.memory) drawMemory(ctx, scene.memory, model.memory, real, time);
  };

  const loop = (t: number): void => {
    frame(t);
    raf = requestAnimationFrame(loop);
  };

  const observer = new ResizeObserver(resize);
  observer.observe(canvas);
  // A devicePixelRatio change (zoom, another monitor) does not always resize the element.
  let dprQuery: MediaQueryList | null = null;
  const watchDpr = (): void => {
    dprQuery?.removeEventListener('change', onDpr);
    dprQuery = window.matchMedia(`(resolution: ${window.devicePixelRatio || 1}dppx)`);
    dprQuery.addEventListener('change', onDpr);
  };
  function onDpr(): void {
    resize();
    watchDpr();
  }
  watchDpr();
  resize();
  raf = requestAnimationFrame(loop);

  return {
    layout: () => scene,
    creatureAt(x, y) {
      for (const p of scene.placements) {
        const c = p.cell;
        if (x >= c.x && x < c.x + c.w && y >= c.y && y < c.y + c.h) return p.creature;
      }
      return null;
    },
    destroy() {
      cancelAnimationFrame(raf);
      observer.disconnect();
      dprQuery?.removeEventListener('change', onDpr);
    },
  };
}

function drawOne(
  ctx: CanvasRenderingContext2D,
  p: Placement,
  model: SceneModel,
  now: number,
  real: number,
  time: number,
  highlighted: string | null,
): void {
  const name = p.creature.name;
  drawCreature(ctx, p, {
    state: model.activity.state(name, now),
    pulse: model.activity.pulse(name, real),
    trail: model.activity.trail(name, now),
    time,
    now,
    trailMs: TRAIL_MS,
    highlighted: highlighted === name,
  });
}

