// Drawing one creature: its shape (by name), its state (idle, active, error), the ring of
// an event that just animated it, and the trail of its recent activity. Everything stays
// within the placement's circle (radius r), so layout.ts's no-overlap guarantee holds.
import type { CreatureState, TrailDot } from './activity';
import { CREATURE, type Zone } from './creatures';
import type { EventType } from './events';
import { hash01, type Placement } from './layout';

export const ZONE_COLOUR: Record<Zone, string> = {
  listening: '#5fd3c6',
  thinking: '#a78bfa',
  acting: '#ff9f7a',
};

/** The body colour of a creature in error: plain red, so tests can find it in pixels too. */
export const ERROR_COLOUR = '#ff3b3b';

export const EVENT_COLOUR: Record<EventType, string> = {
  start: '#ffe066',
  complete: '#7dffa0',
  error: '#ff3b3b',
  metric: '#7cc8ff',
};

type Shape = 'fish' | 'jelly' | 'tentacles' | 'star' | 'shell' | 'coil';

const SHAPES: ReadonlyMap<string, Shape> = new Map<string, Shape>([
  [CREATURE.JELLYFISH, 'jelly'],
  [CREATURE.NYMPH, 'jelly'],
  [CREATURE.KRAKEN, 'tentacles'],
  [CREATURE.SQUID, 'tentacles'],
  [CREATURE.CUTTLEFISH, 'tentacles'],
  [CREATURE.STARFISH, 'star'],
  [CREATURE.CORAL, 'star'],
  [CREATURE.OWL, 'shell'],
  [CREATURE.DRAGON, 'shell'],
  [CREATURE.SEA_CUCUMBER, 'shell'],
  [CREATURE.OUROBOROS, 'coil'],
  [CREATURE.LEVIATHAN, 'coil'],
  [CREATURE.HYDRA, 'coil'],
  [CREATURE.BASILISK, 'coil'],
  [CREATURE.SERPENT, 'coil'],
  [CREATURE.EEL, 'coil'],
]);

export function shapeOf(name: string): Shape {
  return SHAPES.get(name) ?? 'fish';
}

export interface CreatureLook {
  state: CreatureState;
  /** 0..1 progress of the event ring, and the event's type; null: no ring. */
  pulse: { t: number; type: EventType } | null;
  trail: TrailDot[];
  /** Seconds on a continuous clock, for swimming; 0 with reduced motion. */
  time: number;
  now: number;
  trailMs: number;
  highlighted: boolean;
}

function bodyColour(zone: Zone, state: CreatureState): string {
  if (state === 'error') return ERROR_COLOUR;
  return ZONE_COLOUR[zone];
}

function drawShape(ctx: CanvasRenderingContext2D, shape: Shape, r: number, wiggle: number): void {
  ctx.beginPath();
  switch (shape) {
    case 'jelly': {
      ctx.arc(0, -0.1 * r, 0.6 * r, Math.PI, 0);
      ctx.closePath();
      ctx.fill();
      ctx.lineWidth = Math.max(1, 0.08 * r);
      ctx.strokeStyle = ctx.fillStyle;
      for (let i = -2; i <= 2; i++) {
        ctx.beginPath();
        ctx.moveTo(i * 0.22 * r, -0.1 * r);
        ctx.quadraticCurveTo(i * 0.22 * r + wiggle * 0.2 * r, 0.4 * r, i * 0.22 * r, 0.85 * r);
        ctx.stroke();
      }
      return;
    }
    case 'tentacles': {
      ctx.ellipse(0, -0.25 * r, 0.5 * r, 0.45 * r, 0, 0, Math.PI * 2);
      ctx.fill();
      ctx.lineWidth = Math.max(1, 0.12 * r);
      ctx.strokeStyle = ctx.fillStyle;
      for (let i = -3; i <= 3; i += 2) {
        ctx.beginPath();
        ctx.moveTo(i * 0.12 * r, 0.1 * r);
        ctx.quadraticCurveTo(i * 0.3 * r + wiggle * 0.15 * r, 0.5 * r, i * 0.25 * r, 0.85 * r);
        ctx.stroke();
      }
      return;
    }
    case 'star': {
      for (let i = 0; i < 10; i++) {
        const a = (i * Math.PI) / 5 - Math.PI / 2 + wiggle * 0.05;
        const rr = (i % 2 === 0 ? 0.9 : 0.4) * r;
        if (i === 0) ctx.moveTo(Math.cos(a) * rr, Math.sin(a) * rr);
        else ctx.lineTo(Math.cos(a) * rr, Math.sin(a) * rr);
      }
      ctx.closePath();
      ctx.fill();
      return;
    }
    case 'shell': {
      ctx.ellipse(0, 0.05 * r, 0.75 * r, 0.55 * r, 0, Math.PI, 0);
      ctx.lineTo(0.75 * r, 0.2 * r);
      ctx.lineTo(-0.75 * r, 0.2 * r);
      ctx.closePath();
      ctx.fill();
      ctx.fillRect(0.55 * r, -0.05 * r, 0.35 * r, 0.2 * r); // head
      ctx.fillRect(-0.6 * r, 0.2 * r, 0.15 * r, 0.25 * r + wiggle * 0.05 * r); // legs
      ctx.fillRect(0.4 * r, 0.2 * r, 0.15 * r, 0.25 * r - wiggle * 0.05 * r);
      return;
    }
    case 'coil': {
      ctx.lineWidth = Math.max(2, 0.28 * r);
      ctx.lineCap = 'round';
      ctx.strokeStyle = ctx.fillStyle;
      ctx.moveTo(-0.8 * r, 0);
      ctx.bezierCurveTo(-0.4 * r, (-0.6 + wiggle * 0.2) * r, 0, (0.6 - wiggle * 0.2) * r, 0.45 * r, 0);
      ctx.stroke();
      ctx.beginPath();
      ctx.ellipse(0.55 * r, 0, 0.3 * r, 0.22 * r, 0, 0, Math.PI * 2);
      ctx.fill();
      return;
    }
    case 'fish': {
      ctx.moveTo(-0.45 * r, 0);
      ctx.lineTo(-r, (-0.45 + wiggle * 0.1) * r);
      ctx.lineTo(-r, (0.45 + wiggle * 0.1) * r);
      ctx.closePath();
      ctx.fill();
      ctx.beginPath();
      ctx.ellipse(0.15 * r, 0, 0.8 * r, 0.5 * r, 0, 0, Math.PI * 2);
      ctx.fill();
      return;
    }
  }
}

/** Where the body's centre is drawn (the point pixel tests read), relative to p.x/p.y. */
export function bodyCentre(p: Placement): { x: number; y: number } {
  const shape = shapeOf(p.creature.name);
  const dy = shape === 'tentacles' ? -0.25 : shape === 'jelly' ? -0.3 : shape === 'shell' ? -0.1 : 0;
  const dx = shape === 'fish' ? 0.15 : shape === 'coil' ? 0.55 : 0;
  const facing = hash01(p.creature.name) < 0.5 ? 1 : -1;
  return { x: p.x + dx * p.r * facing, y: p.y + dy * p.r };
}

export function drawCreature(ctx: CanvasRenderingContext2D, p: Placement, look: CreatureLook): void {
  const { x, y, r } = p;
  if (r < 1) return;
  const name = p.creature.name;
  const phase = hash01(`${name}~phase`) * Math.PI * 2;
  const speed = look.state === 'active' ? 6 : look.state === 'error' ? 14 : 1.6;
  const wiggle = Math.sin(look.time * speed + phase);
  // Swimming stays within the slack of r: the shape is drawn at 0.88 of the radius.
  const bob = look.state === 'error' ? 0 : wiggle * 0.06 * r;
  const shake = look.state === 'error' ? Math.sin(look.time * 40 + phase) * 0.04 * r : 0;
  const facing = hash01(name) < 0.5 ? 1 : -1;

  drawTrail(ctx, p, look, facing);

  // Glow behind active and error creatures.
  if (look.state !== 'idle') {
    const glow = ctx.createRadialGradient(x, y, r * 0.2, x, y, r);
    const colour = look.state === 'error' ? ERROR_COLOUR : ZONE_COLOUR[p.creature.zone];
    glow.addColorStop(0, `${colour}66`);
    glow.addColorStop(1, `${colour}00`);
    ctx.fillStyle = glow;
    ctx.beginPath();
    ctx.arc(x, y, r, 0, Math.PI * 2);
    ctx.fill();
  }

  ctx.save();
  ctx.translate(x + shake, y + bob);
  ctx.scale(facing * 0.88, 0.88);
  ctx.fillStyle = bodyColour(p.creature.zone, look.state);
  ctx.globalAlpha = look.state === 'idle' ? 0.72 : 1;
  drawShape(ctx, shapeOf(name), r, look.state === 'idle' ? wiggle * 0.4 : wiggle);
  ctx.globalAlpha = 1;
  // An eye, except for the jelly and the star.
  const shape = shapeOf(name);
  if (shape === 'fish' || shape === 'coil' || shape === 'tentacles') {
    const ex = shape === 'fish' ? 0.55 * r : shape === 'coil' ? 0.65 * r : 0.15 * r;
    const ey = shape === 'tentacles' ? -0.35 * r : -0.08 * r;
    ctx.fillStyle = '#041826';
    ctx.beginPath();
    ctx.arc(ex, ey, Math.max(1, 0.08 * r), 0, Math.PI * 2);
    ctx.fill();
  }
  ctx.restore();

  if (look.state === 'error' && r >= 8) {
    ctx.fillStyle = '#ffffff';
    ctx.font = `700 ${Math.round(r * 0.55)}px system-ui, sans-serif`;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    ctx.fillText('!', x + 0.7 * r * -facing, y - 0.6 * r);
  }

  if (look.pulse) {
    const { t, type } = look.pulse;
    ctx.strokeStyle = EVENT_COLOUR[type];
    ctx.globalAlpha = 1 - t;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.arc(x, y, r * (0.5 + 0.5 * t), 0, Math.PI * 2);
    ctx.stroke();
    ctx.globalAlpha = 1;
  }

  if (look.highlighted) {
    ctx.strokeStyle = '#ffffff';
    ctx.setLineDash([3, 3]);
    ctx.lineWidth = 1;
    ctx.strokeRect(p.cell.x + 1.5, p.cell.y + 1.5, Math.max(0, p.cell.w - 3), Math.max(0, p.cell.h - 3));
    ctx.setLineDash([]);
  }

  if (p.label) {
    ctx.fillStyle = look.state === 'error' ? '#ffb3b3' : look.state === 'active' ? '#ffffff' : '#b9d6e0';
    ctx.font = `${look.state === 'idle' ? 400 : 600} 11px system-ui, sans-serif`;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.fillText(fit(ctx, name, p.label.w - 4), x, p.label.y + 2);
  }
}

/** Bubbles rising behind the creature: its latest events, newest nearest, fading with age. */
function drawTrail(ctx: CanvasRenderingContext2D, p: Placement, look: CreatureLook, facing: number): void {
  const n = look.trail.length;
  if (!n) return;
  const { x, y, r } = p;
  look.trail.forEach((dot, i) => {
    const k = n - i; // 1 for the newest
    const age = Math.min(1, Math.max(0, (look.now - dot.ts) / look.trailMs));
    const bx = x - facing * r * (0.55 + 0.09 * k);
    const by = y - r * (0.15 + 0.12 * k);
    ctx.globalAlpha = 0.85 * (1 - age) + 0.1;
    ctx.fillStyle = EVENT_COLOUR[dot.type];
    ctx.beginPath();
    ctx.arc(bx, by, Math.max(1, r * 0.07), 0, Math.PI * 2);
    ctx.fill();
  });
  ctx.globalAlpha = 1;
}

/** Shorten text with an ellipsis so a label never spills into a neighbour's cell. */
export function fit(ctx: CanvasRenderingContext2D, text: string, maxW: number): string {
  if (ctx.measureText(text).width <= maxW) return text;
  let s = text;
  while (s.length > 1 && ctx.measureText(`${s}…`).width > maxW) s = s.slice(0, -1);
  return `${s}…`;
}
