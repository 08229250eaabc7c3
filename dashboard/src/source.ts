// Event sources: the engine's live stream (SSE) with reconnect and backoff, the demo's
// synthetic events, and the Feed that runs one or the other and says which, honestly.
//
// The stream is read with fetch(), not EventSource: EventSource cannot send headers, so its
// token would have to ride in the URL, and URLs land in access logs (the proxy's, the
// engine's). fetch sends it as X-Internal-Token like every other request; the body is parsed
// by eventsource-parser (the SSE format's fields, comments, CRLF, chunks split anywhere).
//
// Reconnecting is ours: on any error (an HTTP error such as a 502 while the engine restarts
// or a 401, a network error, the stream ending) we close the stream, ask the API why (probe:
// unauthorized / unreachable / reachable), and retry with exponential backoff and jitter
// unless the token was refused. A reconnect names the last event received (last_event_id),
// so the engine sends what was missed rather than only its latest 50; the buffer drops
// whatever arrives twice either way.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import type { FetchLike, Reachability } from './api';
import { parseEventJson, type AquariumEvent } from './events';
import { SyntheticGenerator, type SyntheticOptions } from './synthetic';

/** The part of EventSource's interface we use: `open`, the named events, `error`; `close`. */
export interface EventSourceLike {
  addEventListener(type: string, listener: (event: Event) => void): void;
  close(): void;
}

/** One connection attempt: the URL (no secrets in it) and the headers (the token). */
export interface StreamRequest {
  url: string;
  headers: Record<string, string>;
}

export type EventSourceFactory = (request: StreamRequest) => EventSourceLike;

/** The longest unterminated event the parser holds (characters) before giving up on the stream. */
export const MAX_EVENT_CHARS = 4 * 1024 * 1024;

/**
 * An event stream over fetch, with EventSource's events: `open` once the response is a
 * 200 `text/event-stream`; each SSE event under its name (`message` when it has none) as a
 * MessageEvent; `error` once, when the request fails, the answer is not a stream (401, 502,
 * the SPA's index.html), or the stream ends. Unlike EventSource it never reconnects by
 * itself: LiveSource decides. close() aborts the request; nothing is dispatched after it.
 */
export class FetchEventSource implements EventSourceLike {
  private readonly listeners = new Map<string, Array<(event: Event) => void>>();
  private readonly aborter = new AbortController();
  private closed = false;

  constructor(request: StreamRequest, fetcher: FetchLike = (input, init) => fetch(input, init)) {
    // Started a microtask later, so nothing (even a fetcher that throws at once) is
    // dispatched before the caller has added its listeners.
    void Promise.resolve().then(() => this.run(request, fetcher));
  }

  addEventListener(type: string, listener: (event: Event) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }

  close(): void {
    this.closed = true;
    this.aborter.abort();
  }

  private dispatch(type: string, event: Event): void {
    for (const listener of this.listeners.get(type) ?? []) {
      if (this.closed) return;
      try {
        listener(event);
      } catch (err) {
        // As EventTarget does: reported, and the stream goes on.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  private fail(): void {
    this.dispatch('error', new Event('error'));
    this.close();
  }

  private async run(request: StreamRequest, fetcher: FetchLike): Promise<void> {
    try {
      const response = await fetcher(request.url, {
        headers: { Accept: 'text/event-stream', ...request.headers },
        cache: 'no-store',
        signal: this.aborter.signal,
      });
      const type = response.headers.get('content-type') ?? '';
      if (!response.ok || response.body === null || !/^text\/event-stream\b/i.test(type)) {
        this.fail(); // its abort discards the body
        return;
      }
      this.dispatch('open', new Event('open'));
      const parser = createParser({
        maxBufferSize: MAX_EVENT_CHARS,
        onEvent: (message: EventSourceMessage) => {
          const name = message.event || 'message';
          this.dispatch(name, new MessageEvent(name, { data: message.data, lastEventId: message.id ?? '' }));
        },
        // Unknown fields and bad `retry:` values are ignored, as EventSource does; an event
        // past the bound ends the stream (the catch below).
        onError: (error) => {
          if (error.type === 'max-buffer-size-exceeded') throw error;
        },
      });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      while (!this.closed) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(decoder.decode(value, { stream: true }));
      }
      this.fail(); // ended (the engine restarted, the proxy gave up): LiveSource reconnects
    } catch {
      // A network error, an event past the bound, or our own abort (then nothing is
      // dispatched: closed).
      this.fail();
    }
  }
}

export const fetchEventSource: EventSourceFactory = (request) => new FetchEventSource(request);

export interface BackoffOptions {
  baseMs: number;
  maxMs: number;
  /** ±fraction of the delay, so many dashboards do not reconnect in lockstep. */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 500, maxMs: 10_000, jitter: 0.2 };

/** Delay before retry number `attempt` (0-based): base·2^attempt, capped, with jitter. */
export function backoffDelay(attempt: number, opts: BackoffOptions = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const raw = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.max(0, attempt));
  const factor = 1 - opts.jitter + 2 * opts.jitter * random();
  return Math.round(Math.min(opts.maxMs, raw * factor));
}

export type LiveState = 'idle' | 'connecting' | 'live' | 'reconnecting' | 'unauthorized';

export interface LiveStatus {
  state: LiveState;
  /** Failed connection attempts since the last success. */
  failures: number;
  /** When the next attempt is due (clock ms), while reconnecting. */
  retryAt: number | null;
  /** What the probe said about the last failure. */
  reason: Reachability | null;
}

export interface LiveSourceOptions {
  /** The stream's URL; `resumeAfter` is the last event received (the engine resumes after it). */
  url: (resumeAfter: string | null) => string;
  /** The request's headers, read at each attempt (the token: never in the URL). */
  headers?: () => Record<string, string>;
  open?: EventSourceFactory;
  probe: () => Promise<Reachability>;
  /** False while there is no token: do not knock (the engine records every refusal). */
  hasCredentials?: () => boolean;
  onEvent: (event: AquariumEvent, catchup: boolean) => void;
  onStatus: (status: LiveStatus) => void;
  onInvalid?: (error: Error) => void;
  backoff?: BackoffOptions;
  random?: () => number;
  now?: () => number;
}

/** The SSE event names the stream uses: default messages, and catch-up when it marks them. */
export const STREAM_EVENTS = ['message', 'catchup'] as const;

/** The engine sends its catch-up as plain messages (so the design's `onmessage` client sees
 * them) whose JSON carries `"catchup": true`; older engines sent `event: catchup`. */
export function isCatchup(data: string): boolean {
  try {
    const parsed: unknown = JSON.parse(data);
    return typeof parsed === 'object' && parsed !== null && (parsed as { catchup?: unknown }).catchup === true;
  } catch {
    return false;
  }
}

export class LiveSource {
  private es: EventSourceLike | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private generation = 0;
  private status: LiveStatus = { state: 'idle', failures: 0, retryAt: null, reason: null };
  private lastEventId: string | null = null;

  constructor(private readonly opts: LiveSourceOptions) {}

  get state(): LiveState {
    return this.status.state;
  }

  private set(next: Partial<LiveStatus>): void {
    this.status = { ...this.status, ...next };
    this.opts.onStatus({ ...this.status });
  }

  /** Connect now (again): a new token, or leaving the time machine. */
  start(): void {
    this.stop();
    if (this.opts.hasCredentials && !this.opts.hasCredentials()) {
      this.set({ state: 'unauthorized', failures: 0, retryAt: null, reason: 'unauthorized' });
      return;
    }
    this.set({ state: 'connecting', failures: 0, retryAt: null, reason: null });
    this.connect();
  }

  stop(): void {
    this.generation++;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.es?.close();
    this.es = null;
    if (this.status.state !== 'idle') this.set({ state: 'idle', retryAt: null });
  }

  private connect(): void {
    const gen = ++this.generation;
    const open = this.opts.open ?? fetchEventSource;
    let es: EventSourceLike;
    try {
      es = open({ url: this.opts.url(this.lastEventId), headers: this.opts.headers?.() ?? {} });
    } catch {
      void this.failed();
      return;
    }
    this.es = es;
    es.addEventListener('open', () => {
      if (gen !== this.generation) return;
      this.set({ state: 'live', failures: 0, retryAt: null, reason: 'reachable' });
    });
    for (const name of STREAM_EVENTS) {
      es.addEventListener(name, (ev) => {
        if (gen !== this.generation) return;
        const data = (ev as MessageEvent<unknown>).data;
        if (typeof data !== 'string') return;
        try {
          const event = parseEventJson(data, 'live');
          this.lastEventId = event.event_id;
          this.opts.onEvent(event, name === 'catchup' || isCatchup(data));
        } catch (err) {
          this.opts.onInvalid?.(err instanceof Error ? err : new Error(String(err)));
        }
      });
    }
    es.addEventListener('error', () => {
      if (gen !== this.generation) return;
      void this.failed();
    });
  }

  private async failed(): Promise<void> {
    this.es?.close();
    this.es = null;
    this.generation++; // late callbacks of the closed stream are ignored from here on
    const mine = this.generation;
    const failures = this.status.failures + 1;
    this.set({ state: 'reconnecting', failures, retryAt: null });
    const reason = await this.opts.probe().catch((): Reachability => 'unreachable');
    if (mine !== this.generation) return; // stopped or restarted meanwhile
    if (reason === 'unauthorized') {
      this.set({ state: 'unauthorized', reason, retryAt: null });
      return; // a refused token will not get better by retrying: wait for a new one
    }
    const delay = backoffDelay(failures - 1, this.opts.backoff ?? DEFAULT_BACKOFF, this.opts.random ?? Math.random);
    const now = (this.opts.now ?? Date.now)();
    this.set({ state: 'reconnecting', reason, retryAt: now + delay });
    this.timer = setTimeout(() => {
      this.timer = null;
      if (mine === this.generation) this.connect();
    }, delay);
  }
}

/** The demo: synthetic events on a timer, as if from the engine, each marked as demo. */
export class DemoSource {
  private timer: ReturnType<typeof setInterval> | null = null;
  private generator: SyntheticGenerator;

  constructor(
    private readonly onEvent: (event: AquariumEvent) => void,
    private readonly options: SyntheticOptions = {},
    private readonly now: () => number = Date.now,
    private readonly intervalMs = 200,
  ) {
    this.generator = new SyntheticGenerator(options);
  }

  get running(): boolean {
    return this.timer !== null;
  }

  start(): void {
    if (this.timer !== null) return;
    this.generator = new SyntheticGenerator(this.options);
    const tick = (): void => {
      for (const e of this.generator.tick(this.now())) this.onEvent(e);
    };
    tick();
    this.timer = setInterval(tick, this.intervalMs);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

/** What the page says about its feed (`[data-connection]`). */
export type ConnectionState = 'connecting' | 'live' | 'reconnecting' | 'unauthorized' | 'demo' | 'replay' | 'stopped';

export interface FeedStatus {
  connection: ConnectionState;
  /** The demo is running (always labelled on the page). */
  demo: boolean;
  /** The live source's own status underneath (while in demo: still retrying). */
  live: LiveStatus | null;
}

export interface FeedOptions {
  live: LiveSource;
  demo: DemoSource;
  /** Start the demo when no live connection for this long. */
  demoAfterMs: number;
  /** Demo only, never try the engine (?demo). */
  forceDemo: boolean;
  onStatus: (status: FeedStatus) => void;
  /** The demo stopped because the engine is back: drop its events. */
  onDemoEnd: () => void;
}

/**
 * Runs the live source and falls back to the demo when the engine stays unreachable,
 * while still retrying; the first live connection ends the demo. An unauthorized token
 * never starts the demo: the engine is there, it wants a token.
 */
export class Feed {
  private demoTimer: ReturnType<typeof setTimeout> | null = null;
  private liveStatus: LiveStatus | null = null;
  private paused = false;

  constructor(private readonly opts: FeedOptions) {}

  /** The live source reports here (wire LiveSourceOptions.onStatus to it). */
  onLiveStatus(status: LiveStatus): void {
    this.liveStatus = status;
    if (this.paused || this.opts.forceDemo) return;
    if (status.state === 'live') {
      this.clearDemoTimer();
      if (this.opts.demo.running) {
        this.opts.demo.stop();
        this.opts.onDemoEnd();
      }
    } else if (status.state === 'unauthorized') {
      this.clearDemoTimer();
      if (this.opts.demo.running) {
        this.opts.demo.stop();
        this.opts.onDemoEnd();
      }
    } else if (status.state === 'connecting' || status.state === 'reconnecting') {
      if (!this.opts.demo.running && this.demoTimer === null) {
        this.demoTimer = setTimeout(() => {
          this.demoTimer = null;
          const s = this.liveStatus?.state;
          if (!this.paused && (s === 'connecting' || s === 'reconnecting')) {
            this.opts.demo.start();
            this.report();
          }
        }, this.opts.demoAfterMs);
      }
    }
    this.report();
  }

  private clearDemoTimer(): void {
    if (this.demoTimer !== null) clearTimeout(this.demoTimer);
    this.demoTimer = null;
  }

  status(): FeedStatus {
    if (this.paused) return { connection: 'replay', demo: false, live: null };
    if (this.opts.forceDemo) return { connection: 'demo', demo: true, live: null };
    const live = this.liveStatus;
    if (this.opts.demo.running) return { connection: 'demo', demo: true, live };
    const state = live?.state ?? 'connecting';
    return { connection: state === 'idle' ? 'stopped' : state, demo: false, live };
  }

  private report(): void {
    this.opts.onStatus(this.status());
  }

  start(): void {
    this.paused = false;
    if (this.opts.forceDemo) {
      this.opts.demo.start();
      this.report();
      return;
    }
    this.opts.live.start();
  }

  /** Stop everything for the time machine; start() comes back to live. */
  pause(): void {
    this.paused = true;
    this.clearDemoTimer();
    this.opts.live.stop();
    if (this.opts.demo.running) {
      this.opts.demo.stop();
      this.opts.onDemoEnd();
    }
    this.report();
  }

  /** A new token: reconnect at once. */
  restart(): void {
    if (this.paused || this.opts.forceDemo) return;
    this.opts.live.start();
  }
}
