import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { EventPage, EventQuery } from './api';
import type { AquariumEvent } from './events';
import { makeEvent } from './testing/fixtures';
import { loadRange, ReplaySchedule, TimeMachine, type ReplayStatus } from './timemachine';

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const at = (s: number, creature = 'jellyfish') => makeEvent({ ts: T0 + s * 1000, creature });

describe('loadRange', () => {
  it('pages by offset until a short page, sorts, and drops duplicates', async () => {
    const stored = Array.from({ length: 25 }, (_, i) => at(25 - i));
    const queries: EventQuery[] = [];
    const fetchPage = async (q: EventQuery): Promise<EventPage> => {
      queries.push(q);
      const page = stored.slice(q.offset ?? 0, (q.offset ?? 0) + (q.limit ?? 0));
      return { events: [...page, ...(q.offset === 10 ? [stored[0]!] : [])], invalid: 0, source: 'postgres' };
    };
    const got = await loadRange(fetchPage, new Date(T0), new Date(T0 + 60_000), 1000, 10);
    expect(queries.map((q) => q.offset)).toEqual([0, 10, 20]);
    expect(queries[0]).toMatchObject({ since: new Date(T0).toISOString(), until: new Date(T0 + 60_000).toISOString(), limit: 10 });
    expect(got.events.map((e) => e.ts)).toEqual(stored.map((e) => e.ts).sort((a, b) => a - b));
    expect(got).toMatchObject({ truncated: false, source: 'postgres' });
  });

  it('stops at maxEvents and says the range held more', async () => {
    const fetchPage = async (q: EventQuery): Promise<EventPage> => ({
      events: Array.from({ length: q.limit ?? 0 }, (_, i) => at((q.offset ?? 0) + i)),
      invalid: 0,
      source: null,
    });
    const got = await loadRange(fetchPage, new Date(T0), new Date(T0 + 1e9), 25, 10);
    expect(got.events).toHaveLength(25);
    expect(got.truncated).toBe(true);
  });
});

describe('ReplaySchedule', () => {
  const events = [at(10), at(11), at(11.5), at(40), at(41)];

  it('plays events when the virtual clock passes them, speed times faster', () => {
    const s = new ReplaySchedule(events, T0, T0 + 60_000, { speed: 2, maxGapMs: 60_000 });
    expect(s.virtualNow).toBe(T0 + 9_000); // a second's lead-in before the first event
    expect(s.advance(499)).toEqual([]);
    expect(s.advance(1).map((e) => e.ts)).toEqual([T0 + 10_000]);
    expect(s.advance(750).map((e) => e.ts)).toEqual([T0 + 11_000, T0 + 11_500]);
    expect(s.played).toBe(3);
    expect(s.progress).toBeCloseTo(0.6);
    expect(s.virtualNow).toBe(T0 + 11_500);
  });

  it('shortens idle stretches to maxGapMs of virtual time', () => {
    const s = new ReplaySchedule(events, T0, T0 + 60_000, { speed: 1, maxGapMs: 2_000 });
    s.advance(2_500); // up to 11.5 s
    // 28.5 s of silence before 40 s: only 2 s of it are played.
    expect(s.advance(1_999)).toEqual([]);
    expect(s.advance(1).map((e) => e.ts)).toEqual([T0 + 40_000]);
  });

  it('delivers everything once, in order, however the time is sliced', () => {
    const slices = [1, 7, 333, 2_000, 5, 50_000];
    const s = new ReplaySchedule(events, T0, T0 + 60_000, { speed: 3, maxGapMs: 5_000 });
    const got: AquariumEvent[] = [];
    for (const ms of slices) got.push(...s.advance(ms));
    expect(got).toEqual(events);
    expect(s.done).toBe(true);
    expect(s.virtualNow).toBeLessThanOrEqual(T0 + 60_000);
  });

  it('changing speed mid-way changes the pace', () => {
    const s = new ReplaySchedule(events, T0, T0 + 60_000, { speed: 1, maxGapMs: 60_000 });
    s.advance(1_000); // reaches 10 s
    s.speed = 10;
    expect(s.advance(150).map((e) => e.ts)).toEqual([T0 + 11_000, T0 + 11_500]);
  });

  it('an empty range is done at once; a non-positive speed is refused', () => {
    const empty = new ReplaySchedule([], T0, T0 + 1000, { speed: 1, maxGapMs: 1000 });
    expect(empty.done).toBe(true);
    expect(empty.progress).toBe(1);
    expect(() => new ReplaySchedule(events, T0, T0 + 1, { speed: 0, maxGapMs: 1 })).toThrow(RangeError);
  });
});

describe('TimeMachine', () => {
  let now = 0;
  beforeEach(() => {
    vi.useFakeTimers();
    now = 0;
  });
  afterEach(() => vi.useRealTimers());

  function machine(events: AquariumEvent[], fail = false) {
    const played: AquariumEvent[] = [];
    const statuses: ReplayStatus[] = [];
    const tm = new TimeMachine({
      load: async () => {
        if (fail) throw new Error('HTTP 503');
        return { events, truncated: false, source: 'ring' };
      },
      onEvent: (e) => played.push(e),
      onStatus: (s) => statuses.push(s),
      now: () => now,
      tickMs: 50,
      maxGapMs: 5_000,
    });
    const step = (ms: number) => {
      for (let i = 0; i < ms / 50; i++) {
        now += 50;
        vi.advanceTimersByTime(50);
      }
    };
    return { tm, played, statuses, step };
  }

  it('loads, plays at the chosen speed, pauses, resumes, and finishes', async () => {
    const events = [at(1), at(2), at(3)];
    const m = machine(events);
    await m.tm.play(new Date(T0), new Date(T0 + 10_000), 1);
    expect(m.statuses.map((s) => s.state)).toContain('loading');
    expect(m.tm.state).toBe('playing');
    m.step(1_000); // lead-in of 1 s (starts at 0 s, range start)
    expect(m.played).toHaveLength(1);
    m.tm.pause();
    expect(m.tm.state).toBe('paused');
    m.step(10_000);
    expect(m.played).toHaveLength(1);
    m.tm.resume();
    m.tm.setSpeed(10);
    m.step(200);
    expect(m.played).toEqual(events);
    expect(m.tm.state).toBe('done');
    expect(m.statuses.at(-1)).toMatchObject({ state: 'done', total: 3, played: 3, source: 'ring' });
  });

  it('reports a failed load, and a range that ends before it starts', async () => {
    const m = machine([], true);
    await m.tm.play(new Date(T0), new Date(T0 + 1000), 1);
    expect(m.statuses.at(-1)).toMatchObject({ state: 'error', error: 'HTTP 503' });
    await m.tm.play(new Date(T0 + 1000), new Date(T0), 1);
    expect(m.statuses.at(-1)?.error).toMatch(/ends before it starts/);
  });

  it('stop() ends a replay and plays nothing more', async () => {
    const m = machine([at(1), at(30)]);
    await m.tm.play(new Date(T0), new Date(T0 + 60_000), 1);
    m.step(1_000);
    m.tm.stop();
    m.step(60_000);
    expect(m.played).toHaveLength(1);
    expect(m.tm.state).toBe('idle');
    expect(m.tm.virtualNow).toBeNull();
  });
});
