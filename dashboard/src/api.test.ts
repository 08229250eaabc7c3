import { describe, expect, it } from 'vitest';
import { ApiError, EngineApi, type FetchLike } from './api';
import { rawEvent } from './testing/fixtures';

/** A fetch double: answers from a function of the URL and records the requests. */
function fetchDouble(answer: (url: string) => Response | Error) {
  const calls: Array<{ url: string; headers: Record<string, string> }> = [];
  const fetcher: FetchLike = async (url, init) => {
    calls.push({ url, headers: (init?.headers ?? {}) as Record<string, string> });
    const a = answer(url);
    if (a instanceof Error) throw a;
    return a;
  };
  return { fetcher, calls };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

describe('EngineApi', () => {
  it('builds the stream request: the resume point in the URL, the token in a header only', () => {
    const api = new EngineApi('http://e:8100', 'a b');
    expect(api.streamUrl()).toBe('http://e:8100/v1/events/stream');
    expect(api.streamUrl('f'.repeat(32))).toBe(`http://e:8100/v1/events/stream?last_event_id=${'f'.repeat(32)}`);
    expect(api.streamHeaders()).toEqual({ 'X-Internal-Token': 'a b' });
    const none = new EngineApi('', null);
    expect(none.streamUrl()).toBe('/v1/events/stream');
    expect(none.streamHeaders()).toEqual({});
    none.token = 'later';
    expect(none.streamHeaders()).toEqual({ 'X-Internal-Token': 'later' });
    expect(none.streamUrl('x')).not.toContain('later');
  });

  it.each([
    [401, 'unauthorized'],
    [403, 'unauthorized'],
    [502, 'unreachable'],
    [503, 'unreachable'],
    [200, 'reachable'],
    [404, 'reachable'],
  ] as const)('probe maps HTTP %i to %s', async (status, expected) => {
    const { fetcher } = fetchDouble(() => json({}, status));
    expect(await new EngineApi('', 't', fetcher).probe()).toBe(expected);
  });

  it('probe says unreachable when the request fails outright', async () => {
    const { fetcher } = fetchDouble(() => new TypeError('Failed to fetch'));
    expect(await new EngineApi('', 't', fetcher).probe()).toBe('unreachable');
  });

  it('reads a page of events with the token header, counting invalid items', async () => {
    const { fetcher, calls } = fetchDouble(() =>
      json({ events: [rawEvent({ creature: 'shark' }), { nope: 1 }], source: 'postgres', next_offset: null }),
    );
    const api = new EngineApi('', 'tok', fetcher);
    const page = await api.events({ since: '2026-01-01T00:00:00.000Z', limit: 1000, offset: 0 });
    expect(calls[0]?.url).toBe('/v1/events?since=2026-01-01T00%3A00%3A00.000Z&limit=1000&offset=0');
    expect(calls[0]?.headers['X-Internal-Token']).toBe('tok');
    expect(page.events.map((e) => [e.creature, e.origin])).toEqual([['shark', 'replay']]);
    expect(page).toMatchObject({ invalid: 1, source: 'postgres', nextOffset: null });
  });

  it('turns a refused token into an ApiError with the status', async () => {
    const { fetcher } = fetchDouble(() => json({ detail: 'invalid' }, 401));
    await expect(new EngineApi('', 'bad', fetcher).tierStats()).rejects.toMatchObject({ name: 'ApiError', status: 401 });
    const down = fetchDouble(() => new TypeError('Failed to fetch'));
    await expect(new EngineApi('', 'x', down.fetcher).tierStats()).rejects.toBeInstanceOf(ApiError);
  });
});
