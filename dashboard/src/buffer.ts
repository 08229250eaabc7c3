// The event buffer: the recent events of one feed, in time order, each once.
//
// Reconnecting replays the stream's catch-up (the last 50 events), and catch-up events can
// be older than live ones already shown: the buffer drops duplicates by event_id and keeps
// time order by inserting in place, so the navigator and the trails never see an event twice.
import type { AquariumEvent } from './events';

export class EventBuffer {
  private readonly items: AquariumEvent[] = [];
  private readonly ids = new Set<string>();

  constructor(readonly capacity = 1000) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer');
  }

  get size(): number {
    return this.items.length;
  }

  has(eventId: string): boolean {
    return this.ids.has(eventId);
  }

  /**
   * Add an event. Returns false (and changes nothing) for a duplicate, or for an event older
   * than everything kept when the buffer is full (it would be evicted at once).
   */
  add(event: AquariumEvent): boolean {
    if (this.ids.has(event.event_id)) return false;
    const full = this.items.length >= this.capacity;
    const oldest = this.items[0];
    if (full && oldest && event.ts < oldest.ts) return false;
    // Upper bound: equal timestamps keep arrival order.
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.items[mid] as AquariumEvent).ts <= event.ts) lo = mid + 1;
      else hi = mid;
    }
    this.items.splice(lo, 0, event);
    this.ids.add(event.event_id);
    while (this.items.length > this.capacity) {
      const dropped = this.items.shift() as AquariumEvent;
      this.ids.delete(dropped.event_id);
    }
    return true;
  }

  /** Every event, oldest first (a copy). */
  all(): AquariumEvent[] {
    return [...this.items];
  }

  /** The newest `n` events, newest first, optionally only those `keep` accepts. */
  latest(n: number, keep?: (e: AquariumEvent) => boolean): AquariumEvent[] {
    const out: AquariumEvent[] = [];
    for (let i = this.items.length - 1; i >= 0 && out.length < n; i--) {
      const e = this.items[i] as AquariumEvent;
      if (!keep || keep(e)) out.push(e);
    }
    return out;
  }

  get(eventId: string): AquariumEvent | undefined {
    if (!this.ids.has(eventId)) return undefined;
    return this.items.find((e) => e.event_id === eventId);
  }

  /** Remove the events `drop` accepts (e.g. the demo's when the engine comes back). */
  removeWhere(drop: (e: AquariumEvent) => boolean): number {
    let removed = 0;
    for (let i = this.items.length - 1; i >= 0; i--) {
      const e = this.items[i] as AquariumEvent;
      if (drop(e)) {
        this.items.splice(i, 1);
        this.ids.delete(e.event_id);
        removed++;
      }
    }
    return removed;
  }

  clear(): void {
    this.items.length = 0;
    this.ids.clear();
  }
}
