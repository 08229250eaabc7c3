import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Reachability } from './api';
import type { AquariumEvent } from './events';
import {
  backoffDelay,
  DemoSource,
  Feed,
  FetchEventSource,
  isCatchup,
  LiveSource,
  MAX_EVENT_CHARS,
  type EventSourceLike,
  type FeedStatus,
  type LiveStatus,
} from './source';
import { EventSourceDouble } from './testing/event-source-double';
import { fetchStreamDouble, settle } from './testing/fetch-stream-double';
import { rawEvent } from './testing/fixtures';

const flush = async (): Promise<void> => {
  // Let the probe's promise and its continuation run.
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

function live(probe: () => Promise<Reachability> = async () => 'unreachable') {
  const events: Array<[AquariumEvent, boolean]> = [];
  const statuses: LiveStatus[] = [];
  const invalid: Error[] = [];
  let token = 'tok';
  const source = new LiveSource({
    url: (after) => `/v1/events/stream${after ? `?last_event_id=${after}` : ''}`,
    headers: () => ({ 'X-Internal-Token': token }),
    open: (request) => new EventSourceDouble(request),
    probe,
    onEvent: (e, catchup) => events.push([e, catchup]),
    onStatus: (s) => statuses.push(s),
    onInvalid: (e) => invalid.push(e),
    random: () => 0.5, // no jitter
  });
  return { source, events, statuses, invalid, setToken: (t: string) => (token = t) };
}

beforeEach(() => {
  EventSourceDouble.reset();
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('backoffDelay', () => {
  it('doubles from the base up to the cap, with bounded jitter', () => {
    const none = () => 0.5;
    const opts = { baseMs: 500, maxMs: 10_000, jitter: 0.2 };
    expect([0, 1, 2, 3, 4, 5, 10].map((n) => backoffDelay(n, opts, none))).toEqual([500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
    expect(backoffDelay(0, opts, () => 0)).toBe(400);
    expect(backoffDelay(0, opts, () => 1)).toBe(600);
    expect(backoffDelay(10, opts, () => 1)).toBe(10_000); // jitter never exceeds the cap
  });
});

describe('LiveSource', () => {
  it('connects with the token (a header, not the URL), goes live on open and passes events and catch-up on', () => {
    const t = live();
    t.source.start();
    const es = EventSourceDouble.latest();
    expect(es.url).toBe('/v1/events/stream');
    expect(es.headers).toEqual({ 'X-Internal-Token': 'tok' });
    expect(t.source.state).toBe('connecting');
    es.open();
    expect(t.source.state).toBe('live');
    es.send(rawEvent({ creature: 'siren' }), 'catchup');
    es.send(rawEvent({ creature: 'shark' }));
    expect(t.events.map(([e, c]) => [e.creature, c])).toEqual([
      ['siren', true],
      ['shark', false],
    ]);
    expect(t.events[0]?.[0].origin).toBe('live');
  });

  it("takes the engine's catch-up as plain messages marked in their JSON", () => {
    const t = live();
    t.source.start();
    const es = EventSourceDouble.latest();
    es.open();
    es.send({ ...rawEvent({ creature: 'siren' }), catchup: true });
    es.send(rawEvent({ creature: 'shark' }));
    expect(t.events.map(([e, c]) => [e.creature, c])).toEqual([
      ['siren', true],
      ['shark', false],
    ]);
    expect(isCatchup('{"catchup": false}')).toBe(false);
    expect(isCatchup('not json')).toBe(false);
  });

  it('a reconnect asks to resume after the last event received', async () => {
    const t = live();
    t.source.start();
    const first = EventSourceDouble.latest();
    first.open();
    const seen = rawEvent();
    first.send(seen);
    first.fail();
    await flush();
    vi.advanceTimersByTime(500);
    expect(EventSourceDouble.latest().url).toBe(`/v1/events/stream?last_event_id=${String(seen['event_id'])}`);
    expect(EventSourceDouble.latest().headers).toEqual({ 'X-Internal-Token': 'tok' });
  });

  it('reports invalid messages and keeps going', () => {
    const t = live();
    t.source.start();
    const es = EventSourceDouble.latest();
    es.open();
    es.send('not json');
    es.send({ ...rawEvent(), creature: 'otter' });
    es.send(rawEvent({ creature: 'phoenix' }));
    expect(t.invalid).toHaveLength(2);
    expect(t.events.map(([e]) => e.creature)).toEqual(['phoenix']);
  });

  it('reconnects after an error with growing delays, and resets them once live', async () => {
    const t = live(async () => 'unreachable');
    t.source.start();
    EventSourceDouble.latest().fail();
    await flush();
    expect(EventSourceDouble.opened[0]?.closed).toBe(true);
    expect(t.source.state).toBe('reconnecting');
    expect(t.statuses.at(-1)).toMatchObject({ failures: 1, reason: 'unreachable' });
    vi.advanceTimersByTime(499);
    expect(EventSourceDouble.opened).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(EventSourceDouble.opened).toHaveLength(2);
    EventSourceDouble.latest().fail();
    await flush();
    vi.advanceTimersByTime(999);
    expect(EventSourceDouble.opened).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(EventSourceDouble.opened).toHaveLength(3);
    EventSourceDouble.latest().open();
    expect(t.source.state).toBe('live');
    // Live again: the next loss starts over at the base delay.
    EventSourceDouble.latest().fail();
    await flush();
    vi.advanceTimersByTime(500);
    expect(EventSourceDouble.opened).toHaveLength(4);
  });

  it('stops retrying when the token is refused, and start() tries a new one', async () => {
    const t = live(async () => 'unauthorized');
    t.source.start();
    EventSourceDouble.latest().fail();
    await flush();
    expect(t.source.state).toBe('unauthorized');
    vi.advanceTimersByTime(60_000);
    expect(EventSourceDouble.opened).toHaveLength(1);
    t.setToken('better');
    t.source.start();
    expect(EventSourceDouble.latest().headers).toEqual({ 'X-Internal-Token': 'better' });
  });

  it('without a token it does not knock: unauthorized at once', () => {
    const statuses: LiveStatus[] = [];
    const source = new LiveSource({
      url: () => '/v1/events/stream',
      open: (request) => new EventSourceDouble(request),
      probe: async () => 'reachable',
      hasCredentials: () => false,
      onEvent: () => {},
      onStatus: (s) => statuses.push(s),
    });
    source.start();
    expect(EventSourceDouble.opened).toHaveLength(0);
    expect(source.state).toBe('unauthorized');
  });

  it('ignores a closed stream’s late messages, and stop() cancels a pending retry', async () => {
    const t = live();
    t.source.start();
    const first = EventSourceDouble.latest();
    first.fail();
    await flush();
    first.send(rawEvent());
    expect(t.events).toHaveLength(0);
    t.source.stop();
    expect(t.source.state).toBe('idle');
    vi.advanceTimersByTime(60_000);
    expect(EventSourceDouble.opened).toHaveLength(1);
  });

  it('a probe that answers after stop() changes nothing', async () => {
    let answer: (r: Reachability) => void = () => {};
    const t = live(() => new Promise((resolve) => (answer = resolve)));
    t.source.start();
    EventSourceDouble.latest().fail();
    t.source.stop();
    answer('unreachable');
    await flush();
    expect(t.source.state).toBe('idle');
    vi.advanceTimersByTime(60_000);
    expect(EventSourceDouble.opened).toHaveLength(1);
  });
});

/** What a FetchEventSource dispatched, in order: `open`, `error`, or `name:data`. */
function recorder(es: EventSourceLike, names: string[] = ['message', 'catchup']) {
  const seen: string[] = [];
  es.addEventListener('open', () => seen.push('open'));
  es.addEventListener('error', () => seen.push('error'));
  for (const name of names) {
    es.addEventListener(name, (ev) => {
      const m = ev as MessageEvent<string>;
      seen.push(`${name}:${m.data}${m.lastEventId ? `#${m.lastEventId}` : ''}`);
    });
  }
  return seen;
}

describe('FetchEventSource: the stream over fetch, the token in a header', () => {
  beforeEach(() => {
    vi.useRealTimers(); // real stream reads; nothing here waits on a timer of ours
  });

  it('sends the token as X-Internal-Token (the URL as given), opens on a 200 event stream and parses it', async () => {
    const http = fetchStreamDouble();
    const es = new FetchEventSource({ url: '/v1/events/stream?last_event_id=abc', headers: { 'X-Internal-Token': 'tok' } }, http.fetcher);
    const seen = recorder(es);
    await settle();
    const call = http.latest();
    expect(call.url).toBe('/v1/events/stream?last_event_id=abc');
    expect(call.headers).toEqual({ Accept: 'text/event-stream', 'X-Internal-Token': 'tok' });
    expect(call.init?.cache).toBe('no-store');
    expect(seen).toEqual(['open']);
    // The engine's framing: retry, a comment, catch-up events, then plain messages; chunks
    // split mid-line, CRLF line ends, a character split between two chunks.
    call.write('retry: 1000\n: connected\n\nevent: catchup\nid: 1\nda');
    call.write('ta: {"a":1}\n\nid: 2\r\ndata: {"b":2}\r\n\r\n: keepalive\n\n');
    const bytes = new TextEncoder().encode('data: "é"\n\n');
    call.writeBytes(bytes.slice(0, 8)); // ends inside é's two bytes
    call.writeBytes(bytes.slice(8));
    await settle();
    expect(seen).toEqual(['open', 'catchup:{"a":1}#1', 'message:{"b":2}#2', 'message:"é"']);
    es.close();
  });

  it.each([
    ['a refused token', { status: 401, contentType: 'application/json' }],
    ['a proxy without the engine', { status: 502, contentType: 'text/html' }],
    ['a page instead of a stream', { status: 200, contentType: 'text/html' }],
  ])('%s is an error, never an open stream', async (_what, answer) => {
    const http = fetchStreamDouble(() => answer);
    const seen = recorder(new FetchEventSource({ url: '/s', headers: {} }, http.fetcher));
    await settle();
    expect(seen).toEqual(['error']);
    expect(http.latest().aborted).toBe(true); // the body is not left open
  });

  it('a failed request is an error, even one that throws before returning a promise', async () => {
    const rejected = recorder(new FetchEventSource({ url: '/s', headers: {} }, async () => Promise.reject(new TypeError('Failed to fetch'))));
    const thrown = recorder(
      new FetchEventSource({ url: '/s', headers: {} }, () => {
        throw new TypeError('bad URL');
      }),
    );
    await settle();
    expect(rejected).toEqual(['error']);
    expect(thrown).toEqual(['error']);
  });

  it('the stream ending (the engine went away) is one error, and then it is closed', async () => {
    const http = fetchStreamDouble();
    const seen = recorder(new FetchEventSource({ url: '/s', headers: {} }, http.fetcher));
    await settle();
    http.latest().write('data: 1\n\n');
    http.latest().end();
    await settle();
    expect(seen).toEqual(['open', 'message:1', 'error']);
    expect(http.latest().aborted).toBe(true);
  });

  it('close() aborts the request, and nothing is dispatched after it', async () => {
    const http = fetchStreamDouble();
    const es = new FetchEventSource({ url: '/s', headers: {} }, http.fetcher);
    const seen = recorder(es);
    await settle();
    http.latest().write('data: 1\n\n');
    await settle();
    es.close();
    expect(http.latest().aborted).toBe(true);
    http.latest().write('data: 2\n\n');
    await settle();
    expect(seen).toEqual(['open', 'message:1']);
  });

  it('an event that never ends is cut off (bounded memory): an error, so the page reconnects', async () => {
    const http = fetchStreamDouble();
    const seen = recorder(new FetchEventSource({ url: '/s', headers: {} }, http.fetcher));
    await settle();
    const chunk = 'x'.repeat(64 * 1024);
    http.latest().write('data: ');
    for (let n = 0; n * chunk.length <= MAX_EVENT_CHARS; n++) http.latest().write(chunk);
    await settle(20);
    expect(seen).toEqual(['open', 'error']);
  });

  it('with LiveSource: the token never in a URL, and a reconnect resumes after the last event', async () => {
    const http = fetchStreamDouble();
    const events: string[] = [];
    const source = new LiveSource({
      url: (after) => `/v1/events/stream${after ? `?last_event_id=${after}` : ''}`,
      headers: () => ({ 'X-Internal-Token': 'tok' }),
      open: (request) => new FetchEventSource(request, http.fetcher),
      probe: async () => 'reachable',
      onEvent: (e, catchup) => events.push(`${e.creature}${catchup ? ' (catch-up)' : ''}`),
      onStatus: () => {},
      backoff: { baseMs: 1, maxMs: 1, jitter: 0 },
    });
    source.start();
    await settle();
    expect(source.state).toBe('live');
    const seen = rawEvent({ creature: 'siren' });
    http.latest().write(`event: catchup\nid: ${String(seen['event_id'])}\ndata: ${JSON.stringify(seen)}\n\n`);
    http.latest().write(`data: ${JSON.stringify(rawEvent({ creature: 'shark', id: 'e'.repeat(32) }))}\n\n`);
    http.latest().end(); // the engine restarted
    await settle(20);
    expect(events).toEqual(['siren (catch-up)', 'shark']);
    expect(http.calls).toHaveLength(2);
    expect(http.latest().url).toBe(`/v1/events/stream?last_event_id=${'e'.repeat(32)}`);
    expect(source.state).toBe('live');
    for (const call of http.calls) {
      expect(call.url).not.toContain('tok');
      expect(call.headers['X-Internal-Token']).toBe('tok');
    }
    source.stop();
    expect(http.latest().aborted).toBe(true);
  });
});

describe('DemoSource', () => {
  it('emits synthetic demo events on a timer until stopped', () => {
    const got: AquariumEvent[] = [];
    let now = Date.UTC(2026, 0, 1);
    const demo = new DemoSource((e) => got.push(e), { seed: 1 }, () => now, 200);
    demo.start();
    for (let i = 0; i < 100; i++) {
      now += 200;
      vi.advanceTimersByTime(200);
    }
    expect(got.length).toBeGreaterThan(5);
    expect(got.every((e) => e.origin === 'demo' && e.data['demo'] === true)).toBe(true);
    demo.stop();
    const n = got.length;
    now += 60_000;
    vi.advanceTimersByTime(60_000);
    expect(got).toHaveLength(n);
    expect(demo.running).toBe(false);
  });
});

describe('Feed: live first, the demo when the engine stays away', () => {
  function feed(forceDemo = false, probe: () => Promise<Reachability> = async () => 'unreachable') {
    const statuses: FeedStatus[] = [];
    let demoEnded = 0;
    const demoEvents: AquariumEvent[] = [];
    const demo = new DemoSource((e) => demoEvents.push(e), { seed: 2 });
    let f: Feed | null = null;
    const source = new LiveSource({
      url: () => '/v1/events/stream',
      open: (request) => new EventSourceDouble(request),
      probe,
      onEvent: () => {},
      onStatus: (s) => f?.onLiveStatus(s),
      random: () => 0.5,
    });
    f = new Feed({
      live: source,
      demo,
      demoAfterMs: 6_000,
      forceDemo,
      onStatus: (s) => statuses.push(s),
      onDemoEnd: () => demoEnded++,
    });
    return { feed: f, statuses, demo, demoEvents, ended: () => demoEnded };
  }

  it('starts the demo after demoAfterMs without a connection, and ends it when live', async () => {
    const t = feed();
    t.feed.start();
    EventSourceDouble.latest().fail();
    await flush();
    expect(t.feed.status()).toMatchObject({ connection: 'reconnecting', demo: false });
    vi.advanceTimersByTime(6_000);
    await flush();
    expect(t.feed.status()).toMatchObject({ connection: 'demo', demo: true });
    expect(t.demo.running).toBe(true);
    // Still retrying underneath; the first success ends the demo.
    EventSourceDouble.latest().open();
    expect(t.feed.status()).toMatchObject({ connection: 'live', demo: false });
    expect(t.demo.running).toBe(false);
    expect(t.ended()).toBe(1);
  });

  it('never starts the demo when the connection opens in time', () => {
    const t = feed();
    t.feed.start();
    vi.advanceTimersByTime(5_000);
    EventSourceDouble.latest().open();
    vi.advanceTimersByTime(60_000);
    expect(t.demo.running).toBe(false);
    expect(t.statuses.some((s) => s.demo)).toBe(false);
  });

  it('an unauthorized token is not an unreachable engine: no demo', async () => {
    const t = feed(false, async () => 'unauthorized');
    t.feed.start();
    EventSourceDouble.latest().fail();
    await flush();
    vi.advanceTimersByTime(60_000);
    expect(t.feed.status()).toMatchObject({ connection: 'unauthorized', demo: false });
  });

  it('?demo runs the demo without touching the engine', () => {
    const t = feed(true);
    t.feed.start();
    expect(EventSourceDouble.opened).toHaveLength(0);
    expect(t.feed.status()).toMatchObject({ connection: 'demo', demo: true });
  });

  it('pause() (the time machine) stops both and says replay; start() goes back live', async () => {
    const t = feed();
    t.feed.start();
    EventSourceDouble.latest().fail();
    await flush();
    vi.advanceTimersByTime(6_000);
    expect(t.demo.running).toBe(true);
    t.feed.pause();
    expect(t.demo.running).toBe(false);
    expect(t.feed.status().connection).toBe('replay');
    const opened = EventSourceDouble.opened.length;
    vi.advanceTimersByTime(60_000);
    expect(EventSourceDouble.opened).toHaveLength(opened);
    t.feed.start();
    EventSourceDouble.latest().open();
    expect(t.feed.status().connection).toBe('live');
  });
});
