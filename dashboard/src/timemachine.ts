// The time machine: load a stored range from GET /v1/events and play it back on a virtual
// clock at an adjustable speed. Long idle stretches are shortened to `maxGapMs` of virtual
// time, so a range with a burst at each end does not sit still for an hour at 1x.
import type { EventPage, EventQuery } from './api';
import { MAX_PAGE } from './api';
import type { AquariumEvent } from './events';

export const SPEEDS = [1, 2, 5, 10, 30, 60, 300] as const;
export const DEFAULT_MAX_GAP_MS = 5_000;
/** A replay loads at most this many events (the navigator says when a range had more). */
export const MAX_REPLAY_EVENTS = 20_000;

export interface RangeLoad {
  events: AquariumEvent[];
  /** The range held more than MAX_REPLAY_EVENTS; the earliest ones were kept. */
  truncated: boolean;
  /** Where the engine read them from (ring or postgres), as it says. */
  source: string | null;
}

/** Every stored event in [since, until], paging by offset, oldest first, each once. */
export async function loadRange(
  fetchPage: (query: EventQuery) => Promise<EventPage>,
  since: Date,
  until: Date,
  maxEvents = MAX_REPLAY_EVENTS,
  pageSize = MAX_PAGE,
): Promise<RangeLoad> {
  const seen = new Set<string>();
  const events: AquariumEvent[] = [];
  let source: string | null = null;
  let truncated = false;
  for (let offset = 0; ; offset += pageSize) {
    const page = await fetchPage({
      since: since.toISOString(),
      until: until.toISOString(),
      limit: pageSize,
      offset,
    });
    source ??= page.source;
    for (const e of page.events) {
      if (seen.has(e.event_id)) continue;
      seen.add(e.event_id);
      events.push(e);
    }
    const received = page.events.length + page.invalid;
    if (received < pageSize || page.nextOffset === null) break;
    if (events.length >= maxEvents) {
      truncated = true;
      break;
    }
  }
  events.sort((a, b) => a.ts - b.ts);
  if (events.length > maxEvents) {
    events.length = maxEvents;
    truncated = true;
  }
  return { events, truncated, source };
}

export interface ScheduleOptions {
  speed: number;
  maxGapMs: number;
}

/**
 * Pure playback schedule: `advance(realMs)` moves the virtual clock by realMs × speed and
 * returns the events it passed, in time order.
 */
export class ReplaySchedule {
  private index = 0;
  virtualNow: number;
  speed: number;
  readonly maxGapMs: number;

  constructor(
    private readonly events: readonly AquariumEvent[],
    readonly startTs: number,
    readonly endTs: number,
    opts: ScheduleOptions,
  ) {
    if (!(opts.speed > 0)) throw new RangeError('speed must be positive');
    this.speed = opts.speed;
    this.maxGapMs = opts.maxGapMs;
    const first = events[0];
    // Start at the range start, or a short lead-in before the first event.
    this.virtualNow = Math.max(startTs, first ? first.ts - Math.min(1000, this.maxGapMs) : startTs);
    if (first && first.ts < this.virtualNow) this.virtualNow = first.ts;
  }

  get total(): number {
    return this.events.length;
  }

  get played(): number {
    return this.index;
  }

  get done(): boolean {
    return this.index >= this.events.length;
  }

  /** 0..1 through the events. */
  get progress(): number {
    return this.events.length ? this.index / this.events.length : 1;
  }

  advance(realMs: number): AquariumEvent[] {
    const out: AquariumEvent[] = [];
    let budget = Math.max(0, realMs) * this.speed;
    while (!this.done) {
      const next = this.events[this.index] as AquariumEvent;
      let gap = next.ts - this.virtualNow;
      if (gap > this.maxGapMs) {
        // Skip the idle stretch (free), keeping maxGapMs of it.
        this.virtualNow = next.ts - this.maxGapMs;
        gap = this.maxGapMs;
      }
      if (gap > budget) {
        this.virtualNow += budget;
        return out;
      }
      budget -= Math.max(0, gap);
      this.virtualNow = Math.max(this.virtualNow, next.ts);
      while (!this.done && (this.events[this.index] as AquariumEvent).ts <= this.virtualNow) {
        out.push(this.events[this.index] as AquariumEvent);
        this.index++;
      }
    }
    this.virtualNow = Math.min(this.endTs, this.virtualNow + budget);
    return out;
  }
}

export type ReplayState = 'idle' | 'loading' | 'playing' | 'paused' | 'done' | 'error';

export interface ReplayStatus {
  state: ReplayState;
  total: number;
  played: number;
  virtualNow: number | null;
  truncated: boolean;
  source: string | null;
  error: string | null;
}

export interface TimeMachineOptions {
  load: (since: Date, until: Date) => Promise<RangeLoad>;
  onEvent: (event: AquariumEvent, virtualNow: number) => void;
  onStatus: (status: ReplayStatus) => void;
  /** Real clock for pacing (ms). */
  now?: () => number;
  tickMs?: number;
  maxGapMs?: number;
}

/** Drives a ReplaySchedule on a timer: play, pause, resume, speed, stop. */
export class TimeMachine {
  private schedule: ReplaySchedule | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private lastReal = 0;
  private status: ReplayStatus = { state: 'idle', total: 0, played: 0, virtualNow: null, truncated: false, source: null, error: null };
  private loadGeneration = 0;
  private speed = 10;

  constructor(private readonly opts: TimeMachineOptions) {}

  private realNow(): number {
    return (this.opts.now ?? (() => performance.now()))();
  }

  get state(): ReplayState {
    return this.status.state;
  }

  /** The clock the scene should use while replaying. */
  get virtualNow(): number | null {
    return this.schedule?.virtualNow ?? null;
  }

  private set(next: Partial<ReplayStatus>): void {
    this.status = { ...this.status, ...next };
    this.opts.onStatus({ ...this.status });
  }

  async play(since: Date, until: Date, speed: number): Promise<void> {
    this.halt();
    this.speed = speed;
    const gen = ++this.loadGeneration;
    if (!(until.getTime() > since.getTime())) {
      this.set({ state: 'error', error: 'the range ends before it starts', total: 0, played: 0, virtualNow: null });
      return;
    }
    this.set({ state: 'loading', total: 0, played: 0, virtualNow: null, truncated: false, error: null, source: null });
    let loaded: RangeLoad;
    try {
      loaded = await this.opts.load(since, until);
    } catch (err) {
      if (gen === this.loadGeneration) this.set({ state: 'error', error: err instanceof Error ? err.message : String(err) });
      return;
    }
    if (gen !== this.loadGeneration) return; // stopped or restarted while loading
    this.schedule = new ReplaySchedule(loaded.events, since.getTime(), until.getTime(), {
      speed: this.speed,
      maxGapMs: this.opts.maxGapMs ?? DEFAULT_MAX_GAP_MS,
    });
    this.set({ total: loaded.events.length, truncated: loaded.truncated, source: loaded.source, virtualNow: this.schedule.virtualNow });
    this.resume();
  }

  private tick = (): void => {
    const schedule = this.schedule;
    if (!schedule) return;
    const now = this.realNow();
    const elapsed = now - this.lastReal;
    this.lastReal = now;
    for (const e of schedule.advance(elapsed)) this.opts.onEvent(e, schedule.virtualNow);
    if (schedule.done) {
      this.clearTimer();
      this.set({ state: 'done', played: schedule.played, virtualNow: schedule.virtualNow });
    } else {
      this.set({ played: schedule.played, virtualNow: schedule.virtualNow });
    }
  };

  private clearTimer(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  pause(): void {
    if (this.status.state !== 'playing') return;
    this.tick();
    this.clearTimer();
    if (this.status.state === 'playing') this.set({ state: 'paused' });
  }

  resume(): void {
    const schedule = this.schedule;
    if (!schedule || this.timer !== null) return;
    if (schedule.done) {
      this.set({ state: 'done', played: schedule.played });
      return;
    }
    this.lastReal = this.realNow();
    this.set({ state: 'playing' });
    this.timer = setInterval(this.tick, this.opts.tickMs ?? 50);
  }

  setSpeed(speed: number): void {
    if (!(speed > 0)) return;
    if (this.schedule && this.status.state === 'playing') this.tick(); // the old speed up to now
    this.speed = speed;
    if (this.schedule) this.schedule.speed = speed;
  }

  private halt(): void {
    this.loadGeneration++;
    this.clearTimer();
    this.schedule = null;
  }

  /** Leave the time machine. */
  stop(): void {
    this.halt();
    this.set({ state: 'idle', total: 0, played: 0, virtualNow: null, truncated: false, source: null, error: null });
  }
}
