// Canvas 2D drawing of the static aquarium: water, three zone bands, every creature idle.
// Geometry comes from layout.ts; this file only paints and keeps the canvas sharp on resize.
import { countByZone, ZONES, type Creature, type Zone } from './creatures';
import { hash01, layout, type Layout, type Placement } from './layout';

const ZONE_COLOUR: Record<Zone, string> = {
  listening: '#5fd3c6',
  thinking: '#a78bfa',
  acting: '#ff9f7a',
};

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

/** A small fish: body ellipse, tail and eye, all inside the placement's radius. */
function drawCreature(ctx: CanvasRenderingContext2D, p: Placement): void {
  const { x, y, r } = p;
  if (r < 1) return;
  const colour = ZONE_COLOUR[p.creature.zone];
  const facing = hash01(p.creature.name) < 0.5 ? 1 : -1; // not all fish swim the same way
  ctx.save();
  ctx.translate(x, y);
  ctx.scale(facing, 1);
  ctx.fillStyle = colour;
  ctx.globalAlpha = 0.85;
  ctx.beginPath();
  ctx.moveTo(-0.45 * r, 0);
  ctx.lineTo(-r, -0.45 * r);
  ctx.lineTo(-r, 0.45 * r);
  ctx.closePath();
  ctx.fill();
  ctx.globalAlpha = 1;
  ctx.beginPath();
  ctx.ellipse(0.15 * r, 0, 0.8 * r, 0.5 * r, 0, 0, Math.PI * 2);
  ctx.fill();
  ctx.fillStyle = '#041826';
  ctx.beginPath();
  ctx.arc(0.55 * r, -0.12 * r, Math.max(1, 0.09 * r), 0, Math.PI * 2);
  ctx.fill();
  ctx.restore();

  if (p.label) {
    ctx.fillStyle = '#d8eef5';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.fillText(fit(ctx, p.creature.name, p.label.w - 4), x, p.label.y + 2);
  }
}

/** Shorten text with an ellipsis so a label never spills into a neighbour's cell. */
function fit(ctx: CanvasRenderingContext2D, text: string, maxW: number): string {
  if (ctx.measureText(text).width <= maxW) return text;
  let s = text;
  while (s.length > 1 && ctx.measureText(`${s}…`).width > maxW) s = s.slice(0, -1);
  return `${s}…`;
}

export function drawScene(ctx: CanvasRenderingContext2D, scene: Layout): void {
  drawWater(ctx, scene.width, scene.height);
  drawZones(ctx, scene);
  for (const p of scene.placements) drawCreature(ctx, p);
}

/**
 * Draw the scene into `canvas` and keep it correct when the element is resized or moved
 * to a screen with another devicePixelRatio. Returns a function that stops watching.
 */
export function mountScene(canvas: HTMLCanvasElement, creatures: readonly Creature[]): () => void {
  // Stable hooks for browser tests, independent of pixels.
  const counts = countByZone(creatures);
  canvas.dataset['creatureCount'] = String(creatures.length);
  for (const zone of ZONES) canvas.setAttribute(`data-zone-${zone}`, String(counts[zone]));

  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('Canvas 2D is not available');

  const render = (): void => {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    // Backing store in device pixels, drawing in CSS pixels: sharp on HiDPI screens.
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const scene = layout(w, h, creatures);
    canvas.dataset['layout'] = scene.orientation;
    drawScene(ctx, scene);
  };

  const resize = new ResizeObserver(render);
  resize.observe(canvas);

  // A devicePixelRatio change (zoom, another monitor) does not always resize the element.
  let dprQuery: MediaQueryList | null = null;
  const watchDpr = (): void => {
    dprQuery?.removeEventListener('change', onDpr);
    dprQuery = window.matchMedia(`(resolution: ${window.devicePixelRatio || 1}dppx)`);
    dprQuery.addEventListener('change', onDpr);
  };
  function onDpr(): void {
    render();
    watchDpr();
  }
  watchDpr();
  render();

  return () => {
    resize.disconnect();
    dprQuery?.removeEventListener('change', onDpr);
  };
}
