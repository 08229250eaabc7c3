import { describe, expect, it } from 'vitest';
import { EventParseError, parseEvent, parseEventJson, parseTimestamp } from './events';
import { rawEvent } from './testing/fixtures';

describe('parseEvent (the contract at the edge)', () => {
  it('accepts an engine event and derives ts and origin', () => {
    const raw = rawEvent({ creature: 'siren', type: 'complete', ts: Date.UTC(2026, 4, 8, 13, 56) });
    const e = parseEvent(raw, 'live');
    expect(e.creature).toBe('siren');
    expect(e.zone).toBe('listening');
    expect(e.ts).toBe(Date.UTC(2026, 4, 8, 13, 56));
    expect(e.origin).toBe('live');
  });

  it('reads timestamps with offsets and fractions, and rejects naive ones', () => {
    expect(parseTimestamp('2026-05-08T13:56:00.123456+05:30')).toBe(Date.UTC(2026, 4, 8, 8, 26, 0, 123));
    expect(parseTimestamp('2026-05-08T13:56:00Z')).toBe(Date.UTC(2026, 4, 8, 13, 56));
    expect(parseTimestamp('2026-05-08T13:56:00')).toBeNaN();
  });

  it.each([
    ['an unknown creature', { creature: 'otter' }, /unknown creature/],
    ['a zone that is not the creature’s', { zone: 'acting' }, /zone/],
    ['an unknown event type', { event_type: 'explode' }, /event_type/],
    ['a short event id', { event_id: 'abc' }, /event_id/],
    ['a naive timestamp', { timestamp: '2026-01-01T00:00:00' }, /timestamp/],
    ['another schema version', { schema_version: 2 }, /schema_version/],
    ['data that is not an object', { data: [1] }, /data/],
    ['a numeric session', { session_id: 5 }, /session_id/],
  ])('rejects %s', (_what, patch, message) => {
    expect(() => parseEvent({ ...rawEvent(), ...patch }, 'live')).toThrow(message);
  });

  it('rejects what is not JSON or not an object', () => {
    expect(() => parseEventJson('{nope', 'live')).toThrow(EventParseError);
    expect(() => parseEventJson('[]', 'live')).toThrow(/object/);
  });
});
