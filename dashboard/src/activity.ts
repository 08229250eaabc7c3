// What each creature is doing: its state (idle, active, error), a short trail of recent
// activity, and a pulse when an event animates it. Pure: time comes in as `now` (ms), so the
// same model serves the live feed (wall clock) and the time machine (its virtual clock).
import type { Creature } from './creatures';
import type { AquariumEvent, EventType } from './events';

export type CreatureState = 'idle' | 'active' | 'error';

/** Only events at most this old animate; older ones (catch-up, history) are only listed. */
export const ANIMATE_WINDOW_MS = 30_000;
/** A start never followed by anything: idle again after this long without an event. */
export const ACTIVE_STALE_MS = 120_000;
/** An error shows this long unless a newer event of the creature replaces it. */
export const ERROR_HOLD_MS = 60_000;
/** The trail shows this much recent activity, at most TRAIL_LEN dots. */
export const TRAIL_MS = 120_000;
export const TRAIL_LEN = 6;
/** How long the ring of an animated event lasts. */
export const PULSE_MS = 1_400;

export interface TrailDot {
  readonly eventId: string;
  readonly ts: number;
  readonly type: EventType;
}

export interface CreatureLife {
  readonly name: string;
  state: CreatureState;
  /** Timestamp of the event that set `state` (ms). */
  stateTs: number;
  /** Timestamp of the newest event seen for this creature, animated or not. */
  lastTs: number;
  lastType: EventType | null;
  /** Events that animated this creature. */
  animated: number;
  /** Events seen (animated or not). */
  seen: number;
  /** Clock time the latest pulse began, and its event type. */
  pulseAt: number | null;
  pulseType: EventType | null;
  /** Oldest first, at most TRAIL_LEN. */
  trail: TrailDot[];
}

export function isFresh(eventTs: number, now: number): boolean {
  return now - eventTs <= ANIMATE_WINDOW_MS;
}

function newLife(name: string): CreatureLife {
  return {
    name,
    state: 'idle',
    stateTs: Number.NEGATIVE_INFINITY,
    lastTs: Number.NEGATIVE_INFINITY,
    lastType: null,
    animated: 0,
    seen: 0,
    pulseAt: null,
    pulseType: null,
    trail: [],
  };
}

const NEXT_STATE: Record<EventType, CreatureState | null> = {
  start: 'active',
  complete: 'idle',
  error: 'error',
  metric: null, // progress: keeps the state, refreshes it, pulses
};

export class Activity {
  private readonly lives = new Map<string, CreatureLife>();

  constructor(creatures: readonly Creature[]) {
    for (const c of creatures) this.lives.set(c.name, newLife(c.name));
  }

  /**
   * Take one event at clock time `now`. Returns true when it animated the creature (it is
   * fresh); an old event only joins the trail if recent enough and never changes the state.
   * `realNow` starts the ring on the wall clock (the time machine's clock may run faster).
   */
  apply(event: AquariumEvent, now: number, realNow: number = now): boolean {
    const life = this.lives.get(event.creature);
    if (!life) return false;
    life.seen += 1;
    if (event.ts > life.lastTs) {
      life.lastTs = event.ts;
      life.lastType = event.event_type;
    }
    if (now - event.ts <= TRAIL_MS) this.addTrail(life, event);
    if (!isFresh(event.ts, now)) return false;
    life.animated += 1;
    life.pulseAt = realNow;
    life.pulseType = event.event_type;
    // Out of order (an older event arriving after a newer one): pulse, but keep the state.
    if (event.ts >= life.stateTs) {
      const next = NEXT_STATE[event.event_type];
      const current = this.state(life.name, now);
      if (next !== null) life.state = next;
      else life.state = current; // a metric keeps (and refreshes) the effective state
      life.stateTs = event.ts;
    }
    return true;
  }

  private addTrail(life: CreatureLife, event: AquariumEvent): void {
    const dot: TrailDot = { eventId: event.event_id, ts: event.ts, type: event.event_type };
    const trail = life.trail;
    let i = trail.length;
    while (i > 0 && (trail[i - 1] as TrailDot).ts > dot.ts) i--;
    trail.splice(i, 0, dot);
    if (trail.length > TRAIL_LEN) trail.splice(0, trail.length - TRAIL_LEN);
  }

  /** The state at `now`: an active or error state fades to idle when it has gone stale. */
  state(name: string, now: number): CreatureState {
    const life = this.lives.get(name);
    if (!life) return 'idle';
    const age = now - life.stateTs;
    if (life.state === 'active' && age > ACTIVE_STALE_MS) return 'idle';
    if (life.state === 'error' && age > ERROR_HOLD_MS) return 'idle';
    return life.state;
  }

  /** Trail dots still within TRAIL_MS of `now`, oldest first. */
  trail(name: string, now: number): TrailDot[] {
    const life = this.lives.get(name);
    return life ? life.trail.filter((d) => now - d.ts <= TRAIL_MS && d.ts - now <= TRAIL_MS) : [];
  }

  /** 0..1 progress of the creature's pulse ring at wall-clock `realNow`, or null. */
  pulse(name: string, realNow: number): { t: number; type: EventType } | null {
    const life = this.lives.get(name);
    if (!life || life.pulseAt === null || life.pulseType === null) return null;
    const t = (realNow - life.pulseAt) / PULSE_MS;
    return t >= 0 && t < 1 ? { t, type: life.pulseType } : null;
  }

  life(name: string): Readonly<CreatureLife> | undefined {
    return this.lives.get(name);
  }

  names(): string[] {
    return [...this.lives.keys()];
  }

  /** Everything idle and forgotten (a new feed: demo to live, live to replay). */
  reset(): void {
    for (const name of this.lives.keys()) this.lives.set(name, newLife(name));
  }
}
