// The observability event as the dashboard receives it (her_os_shared.events), validated
// at the edge: everything past parseEvent can trust the shape and the registry.
import { CREATURES, ZONES, type Creature, type Zone } from './creatures';

export const EVENT_TYPES = ['start', 'complete', 'error', 'metric'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Where an event came from: the engine's live stream, the demo generator, or a replay. */
export type Origin = 'live' | 'demo' | 'replay';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface ObservabilityEvent {
  readonly schema_version: 1;
  readonly event_id: string;
  readonly timestamp: string;
  readonly service: string;
  readonly process: string;
  readonly creature: string;
  readonly zone: Zone;
  readonly event_type: EventType;
  readonly session_id: string | null;
  readonly data: Readonly<Record<string, JsonValue>>;
  readonly reasoning: string | null;
}

/** An event plus what the dashboard derives once: its time in ms and its origin. */
export interface AquariumEvent extends ObservabilityEvent {
  readonly ts: number;
  readonly origin: Origin;
}

export const CREATURE_BY_NAME: ReadonlyMap<string, Creature> = new Map(CREATURES.map((c) => [c.name, c]));

const EVENT_ID = /^[0-9a-f]{32}$/;
// An aware ISO time: the engine always sends an offset or Z (AwareDatetime).
const AWARE_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$/;

export class EventParseError extends Error {
  override name = 'EventParseError';
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Milliseconds of an aware ISO timestamp; NaN when it is not one. */
export function parseTimestamp(value: string): number {
  return AWARE_ISO.test(value) ? Date.parse(value) : Number.NaN;
}

/**
 * Validate one event (a parsed JSON value) against the contract and the creature registry.
 * Throws EventParseError naming the first problem; never returns a half-valid event.
 */
export function parseEvent(value: unknown, origin: Origin): AquariumEvent {
  if (!isRecord(value)) throw new EventParseError('event: expected an object');
  const v = value;
  const str = (key: string): string => {
    const x = v[key];
    if (typeof x !== 'string') throw new EventParseError(`event: ${key} must be a string`);
    return x;
  };
  if (v['schema_version'] !== 1) throw new EventParseError('event: unsupported schema_version');
  const eventId = str('event_id');
  if (!EVENT_ID.test(eventId)) throw new EventParseError('event: event_id must be 32 hex digits');
  const timestamp = str('timestamp');
  const ts = parseTimestamp(timestamp);
  if (!Number.isFinite(ts)) throw new EventParseError(`event: timestamp ${timestamp} is not an aware ISO time`);
  const name = str('creature');
  const creature = CREATURE_BY_NAME.get(name);
  if (!creature) throw new EventParseError(`event: unknown creature ${name}`);
  const zone = str('zone');
  if (!(ZONES as readonly string[]).includes(zone) || zone !== creature.zone) {
    throw new EventParseError(`event: zone ${zone} does not match creature ${name}`);
  }
  const eventType = str('event_type');
  if (!(EVENT_TYPES as readonly string[]).includes(eventType)) {
    throw new EventParseError(`event: unknown event_type ${eventType}`);
  }
  const session = v['session_id'] ?? null;
  if (session !== null && typeof session !== 'string') throw new EventParseError('event: session_id must be a string');
  const data = v['data'] ?? {};
  if (!isRecord(data)) throw new EventParseError('event: data must be an object');
  const reasoning = v['reasoning'] ?? null;
  if (reasoning !== null && typeof reasoning !== 'string') throw new EventParseError('event: reasoning must be a string');
  return {
    schema_version: 1,
    event_id: eventId,
    timestamp,
    service: str('service'),
    process: str('process'),
    creature: name,
    zone: creature.zone,
    event_type: eventType as EventType,
    session_id: session,
    data: data as Record<string, JsonValue>,
    reasoning,
    ts,
    origin,
  };
}

/** Parse an SSE message's data (one event as JSON). */
export function parseEventJson(text: string, origin: Origin): AquariumEvent {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new EventParseError('event: not JSON');
  }
  return parseEvent(value, origin);
}
