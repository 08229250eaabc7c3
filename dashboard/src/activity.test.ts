import { describe, expect, it } from 'vitest';
import { Activity, ACTIVE_STALE_MS, ANIMATE_WINDOW_MS, ERROR_HOLD_MS, PULSE_MS, TRAIL_LEN, TRAIL_MS } from './activity';
import { CREATURES } from './creatures';
import { makeEvent } from './testing/fixtures';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);

describe('Activity: creature states', () => {
  it('start makes a creature active, complete idle, error error; metric keeps the state', () => {
    const a = new Activity(CREATURES);
    expect(a.state('jellyfish', NOW)).toBe('idle');
    expect(a.apply(makeEvent({ creature: 'jellyfish', type: 'start', ts: NOW }), NOW)).toBe(true);
    expect(a.state('jellyfish', NOW)).toBe('active');
    a.apply(makeEvent({ creature: 'jellyfish', type: 'metric', ts: NOW + 1 }), NOW + 1);
    expect(a.state('jellyfish', NOW + 1)).toBe('active');
    a.apply(makeEvent({ creature: 'jellyfish', type: 'complete', ts: NOW + 2 }), NOW + 2);
    expect(a.state('jellyfish', NOW + 2)).toBe('idle');
    a.apply(makeEvent({ creature: 'jellyfish', type: 'error', ts: NOW + 3 }), NOW + 3);
    expect(a.state('jellyfish', NOW + 3)).toBe('error');
    // Only that creature changed.
    expect(CREATURES.filter((c) => a.state(c.name, NOW + 3) !== 'idle').map((c) => c.name)).toEqual(['jellyfish']);
  });

  it('only events at most 30 s old animate; older ones are seen but change nothing', () => {
    const a = new Activity(CREATURES);
    const old = makeEvent({ creature: 'siren', type: 'error', ts: NOW - ANIMATE_WINDOW_MS - 1 });
    expect(a.apply(old, NOW)).toBe(false);
    expect(a.state('siren', NOW)).toBe('idle');
    expect(a.life('siren')).toMatchObject({ seen: 1, animated: 0, lastType: 'error' });
    expect(a.pulse('siren', NOW)).toBeNull();
    const edge = makeEvent({ creature: 'siren', type: 'error', ts: NOW - ANIMATE_WINDOW_MS });
    expect(a.apply(edge, NOW)).toBe(true);
    expect(a.state('siren', NOW)).toBe('error');
  });

  it('a late, older event pulses but does not undo a newer state', () => {
    const a = new Activity(CREATURES);
    a.apply(makeEvent({ creature: 'shark', type: 'complete', ts: NOW }), NOW);
    expect(a.apply(makeEvent({ creature: 'shark', type: 'start', ts: NOW - 1000 }), NOW)).toBe(true);
    expect(a.state('shark', NOW)).toBe('idle');
    expect(a.pulse('shark', NOW)?.type).toBe('start');
  });

  it('stale states fade: an unfinished start and an old error become idle', () => {
    const a = new Activity(CREATURES);
    a.apply(makeEvent({ creature: 'manta', type: 'start', ts: NOW }), NOW);
    a.apply(makeEvent({ creature: 'kraken', type: 'error', ts: NOW }), NOW);
    expect(a.state('manta', NOW + ACTIVE_STALE_MS)).toBe('active');
    expect(a.state('manta', NOW + ACTIVE_STALE_MS + 1)).toBe('idle');
    expect(a.state('kraken', NOW + ERROR_HOLD_MS)).toBe('error');
    expect(a.state('kraken', NOW + ERROR_HOLD_MS + 1)).toBe('idle');
  });

  it('rings last PULSE_MS of the real clock, which may differ from the scene clock', () => {
    const a = new Activity(CREATURES);
    const real = 5_000;
    a.apply(makeEvent({ creature: 'griffin', type: 'metric', ts: NOW }), NOW, real);
    expect(a.pulse('griffin', real)).toEqual({ t: 0, type: 'metric' });
    expect(a.pulse('griffin', real + PULSE_MS / 2)?.t).toBeCloseTo(0.5);
    expect(a.pulse('griffin', real + PULSE_MS)).toBeNull();
  });

  it('keeps a short trail: recent events only, newest last, at most TRAIL_LEN', () => {
    const a = new Activity(CREATURES);
    a.apply(makeEvent({ creature: 'phoenix', ts: NOW - TRAIL_MS - 1 }), NOW); // too old for the trail
    for (let i = 0; i < TRAIL_LEN + 2; i++) a.apply(makeEvent({ creature: 'phoenix', type: 'metric', ts: NOW - 10_000 + i }), NOW);
    const trail = a.trail('phoenix', NOW);
    expect(trail).toHaveLength(TRAIL_LEN);
    expect(trail.map((d) => d.ts)).toEqual([...trail.map((d) => d.ts)].sort((x, y) => x - y));
    expect(trail.at(-1)?.ts).toBe(NOW - 10_000 + TRAIL_LEN + 1);
    expect(a.trail('phoenix', NOW + TRAIL_MS)).toEqual([]);
  });

  it('reset forgets everything; unknown creatures are ignored', () => {
    const a = new Activity(CREATURES);
    a.apply(makeEvent({ creature: 'mermaid', type: 'error', ts: NOW }), NOW);
    a.reset();
    expect(a.state('mermaid', NOW)).toBe('idle');
    expect(a.life('mermaid')?.seen).toBe(0);
    expect(a.state('nobody', NOW)).toBe('idle');
  });
});
