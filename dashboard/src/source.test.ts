import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Reachability } from './api';
import type { AquariumEvent } from './events';
import { backoffDelay, DemoSource, Feed, LiveSource, type FeedStatus, type LiveStatus } from './source';
import { EventSourceDouble } from './testing/event-source-double';
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
    url: (after) => `/v1/events/stream?token=${token}${after ? `&last_event_id=${after}` : ''}`,
    open: (url) => new EventSourceDouble(url),
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
  it('connects with the token, goes live on open and passes events and catch-up on', () => {
    const t = live();
    t.source.start();
    const es = EventSourceDouble.latest();
    expect(es.url).toBe('/v1/events/stream?token=tok');
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
    expect(EventSourceDouble.latest().url).toBe(`/v1/events/stream?token=tok&last_event_id=${String(seen['event_id'])}`);
  });

  it('reports invalid messages and keeps going', () => {
    const t = live();
    t.source.start();
    const es = EventSourceDouble.latest();
    es.open();
    es.send('not json');
    es.send({ ...rawEvent(), creature: 'unicorn' });
    es.send(rawEvent({ creature: 'whale' }));
    expect(t.invalid).toHaveLength(2);
    expect(t.events.map(([e]) => e.creature)).toEqual(['whale']);
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
    expect(EventSourceDouble.latest().url).toBe('/v1/events/stream?token=better');
  });

  it('without a token it does not knock: unauthorized at once', () => {
    const statuses: LiveStatus[] = [];
    const source = new LiveSource({
      url: () => '/v1/events/stream',
      open: (url) => new EventSourceDouble(url),
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
      open: (url) => new EventSourceDouble(url),
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
