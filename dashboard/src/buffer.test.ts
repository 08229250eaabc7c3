import { describe, expect, it } from 'vitest';
import { EventBuffer } from './buffer';
import { makeEvent } from './testing/fixtures';

const at = (ts: number, id?: string) => makeEvent({ ts, ...(id ? { id } : {}) });
const order = (b: EventBuffer) => b.all().map((e) => e.ts);

describe('EventBuffer', () => {
  it('keeps events in time order whatever the arrival order', () => {
    const b = new EventBuffer(10);
    for (const ts of [5, 1, 3, 9, 7]) b.add(at(ts));
    expect(order(b)).toEqual([1, 3, 5, 7, 9]);
  });

  it('keeps arrival order among equal timestamps', () => {
    const b = new EventBuffer(10);
    const first = at(5);
    const second = at(5);
    b.add(first);
    b.add(second);
    expect(b.all().map((e) => e.event_id)).toEqual([first.event_id, second.event_id]);
  });

  it('drops duplicates by event id (a reconnect replays the catch-up)', () => {
    const b = new EventBuffer(10);
    const e = at(1);
    expect(b.add(e)).toBe(true);
    expect(b.add({ ...e })).toBe(false);
    expect(b.size).toBe(1);
  });

  it('evicts the oldest beyond capacity and forgets their ids', () => {
    const b = new EventBuffer(3);
    const events = [1, 2, 3, 4].map((ts) => at(ts));
    for (const e of events) b.add(e);
    expect(order(b)).toEqual([2, 3, 4]);
    expect(b.has(events[0]!.event_id)).toBe(false);
    // Older than everything kept while full: refused, nothing changes.
    expect(b.add(at(0))).toBe(false);
    expect(order(b)).toEqual([2, 3, 4]);
    // An evicted event could come back only as new data; it is accepted if recent enough.
    expect(b.add({ ...events[0]!, ts: 10 })).toBe(true);
    expect(order(b)).toEqual([3, 4, 10]);
  });

  it('lists the newest first, filtered, and finds by id', () => {
    const b = new EventBuffer(10);
    b.add(makeEvent({ ts: 1, creature: 'siren' }));
    b.add(makeEvent({ ts: 2, creature: 'shark' }));
    const last = makeEvent({ ts: 3, creature: 'siren' });
    b.add(last);
    expect(b.latest(5).map((e) => e.ts)).toEqual([3, 2, 1]);
    expect(b.latest(1).map((e) => e.ts)).toEqual([3]);
    expect(b.latest(5, (e) => e.creature === 'siren').map((e) => e.ts)).toEqual([3, 1]);
    expect(b.get(last.event_id)).toBe(last);
    expect(b.get('f'.repeat(32))).toBeUndefined();
  });

  it('removes what a predicate selects (the demo’s events) and can be cleared', () => {
    const b = new EventBuffer(10);
    b.add(makeEvent({ ts: 1, origin: 'demo' }));
    const real = makeEvent({ ts: 2 });
    b.add(real);
    b.add(makeEvent({ ts: 3, origin: 'demo' }));
    expect(b.removeWhere((e) => e.origin === 'demo')).toBe(2);
    expect(b.all()).toEqual([real]);
    b.clear();
    expect(b.size).toBe(0);
    expect(b.has(real.event_id)).toBe(false);
  });

  it('rejects a capacity that is not a positive integer', () => {
    expect(() => new EventBuffer(0)).toThrow(RangeError);
    expect(() => new EventBuffer(1.5)).toThrow(RangeError);
  });
});
