// Test helpers (imported by *.test.ts only): well-formed events without the generator.
import { CREATURE_BY_NAME, parseEvent, type AquariumEvent, type EventType, type JsonValue, type Origin } from '../events';

let counter = 0;

export function eventId(n: number = ++counter): string {
  return n.toString(16).padStart(32, '0');
}

export interface MakeEvent {
  creature?: string;
  type?: EventType;
  ts?: number;
  id?: string;
  data?: Record<string, JsonValue>;
  reasoning?: string | null;
  origin?: Origin;
}

/** A valid event of `creature` at `ts` (ms), as the engine would send it. */
export function rawEvent(opts: MakeEvent = {}): Record<string, unknown> {
  const name = opts.creature ?? 'jellyfish';
  const c = CREATURE_BY_NAME.get(name);
  if (!c) throw new Error(`no creature ${name}`);
  return {
    schema_version: 1,
    event_id: opts.id ?? eventId(),
    timestamp: new Date(opts.ts ?? Date.UTC(2026, 0, 1, 12, 0, 0)).toISOString(),
    service: c.service,
    process: c.process,
    creature: c.name,
    zone: c.zone,
    event_type: opts.type ?? 'start',
    session_id: null,
    data: opts.data ?? {},
    reasoning: opts.reasoning ?? null,
  };
}

export function makeEvent(opts: MakeEvent = {}): AquariumEvent {
  return parseEvent(rawEvent(opts), opts.origin ?? 'live');
}
