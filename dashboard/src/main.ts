// Wiring: the engine API, the feed (live stream with the demo as fallback), the time
// machine, the models (activity, memory), and what shows them (scene, navigator, mirror).
import { Activity } from './activity';
import { EngineApi } from './api';
import { EventBuffer } from './buffer';
import { chooseToken, demoForced, engineBaseUrl, saveToken } from './config';
import { CREATURE, CREATURES } from './creatures';
import type { AquariumEvent } from './events';
import { MemoryModel } from './memory';
import { Mirror } from './mirror';
import { Navigator } from './navigator';
import { mountScene } from './scene';
import { DemoSource, Feed, LiveSource, type FeedStatus } from './source';
import { syntheticTierStats } from './synthetic';
import { loadRange, SPEEDS, TimeMachine, type ReplayStatus } from './timemachine';
import './style.css';

/** Start the demo after this long without a live connection. */
const DEMO_AFTER_MS = 6_000;
/** Tier counts are refreshed this often while live (and after each consolidation). */
const TIERS_EVERY_MS = 30_000;

function $<T extends HTMLElement>(selector: string): T {
  const node = document.querySelector<T>(selector);
  if (!node) throw new Error(`${selector} missing from index.html`);
  return node;
}

const storage = ((): Storage | null => {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
})();

const choice = chooseToken(window.location.href, storage);
if (choice.cleanedUrl) window.history.replaceState(null, '', choice.cleanedUrl);
const forceDemo = demoForced(window.location.href);
const api = new EngineApi(engineBaseUrl(import.meta.env.VITE_ENGINE_URL as string | undefined), choice.token);

const activity = new Activity(CREATURES);
const memory = new MemoryModel();
const liveBuffer = new EventBuffer(1000);
const replayBuffer = new EventBuffer(5000);
let mode: 'live' | 'replay' = 'live';
let highlighted: string | null = null;

const navigator_ = new Navigator(
  {
    list: $<HTMLOListElement>('#event-list'),
    details: $('#details'),
    creatureFilter: $<HTMLSelectElement>('#filter-creature'),
    typeFilter: $<HTMLSelectElement>('#filter-type'),
    count: $('#event-count'),
  },
  liveBuffer,
  (name) => {
    highlighted = name;
  },
);

const mirror = new Mirror(CREATURES, $<HTMLUListElement>('#creature-states'), $<HTMLUListElement>('#memory-tiers'), $<HTMLOListElement>('#memory-moves'));

const timeMachine = new TimeMachine({
  load: (since, until) => loadRange((q) => api.events(q), since, until),
  // Every replayed event is fresh at its own time: the replay animates all of them.
  onEvent: (e) => ingest(replayBuffer, e, e.ts),
  onStatus: (s) => showReplay(s),
});

const clock = (): number => (mode === 'replay' ? (timeMachine.virtualNow ?? Date.now()) : Date.now());

/** One event into a buffer, the models and the navigator; `now` decides whether it animates. */
function ingest(buffer: EventBuffer, e: AquariumEvent, now: number): void {
  if (!buffer.add(e)) return; // seen already (a reconnect's catch-up)
  const real = Date.now();
  const animated = activity.apply(e, now, real);
  memory.applyEvent(e, now, real);
  navigator_.added(e, animated);
  if (animated && e.creature === CREATURE.SALMON && e.event_type === 'complete' && e.origin === 'live') void refreshTiers();
  mirror.update(activity, memory, clock());
}

// ---------------------------------------------------------------- memory tiers

async function refreshTiers(): Promise<void> {
  if (mode !== 'live' || feed.status().connection !== 'live') return;
  try {
    const stats = await api.tierStats();
    if (mode === 'live') memory.applyStats(stats, Date.now());
  } catch {
    // keep the last counts; the connection status already says what is wrong
  }
  mirror.update(activity, memory, clock());
}

// ---------------------------------------------------------------- the feed

const connection = $('#connection');
const connectionText = $('#connection-text');
const demoBanner = $('#demo-banner');
let lastStatus: FeedStatus | null = null;

function describe(s: FeedStatus): string {
  const retry = s.live?.retryAt ? Math.max(0, Math.ceil((s.live.retryAt - Date.now()) / 1000)) : null;
  const again = retry !== null ? `retrying in ${retry} s` : 'retrying';
  switch (s.connection) {
    case 'live':
      return 'live';
    case 'connecting':
      return 'connecting to the engine…';
    case 'reconnecting':
      return `engine unreachable — ${again}`;
    case 'unauthorized':
      return 'the engine refused the token — enter it with “Token”';
    case 'demo':
      return forceDemo ? 'demo (asked for with ?demo)' : `demo — engine unreachable, ${again}`;
    case 'replay':
      return 'time machine — live feed paused';
    case 'stopped':
      return 'stopped';
  }
}

function showStatus(s: FeedStatus): void {
  const wasLive = lastStatus?.connection === 'live';
  lastStatus = s;
  connection.dataset['connection'] = s.connection;
  connectionText.textContent = describe(s);
  demoBanner.hidden = !s.demo;
  demoBanner.dataset['demo'] = s.demo ? 'on' : 'off';
  if (s.demo && !memory.loaded) memory.applyStats(syntheticTierStats(), Date.now());
  if (s.connection === 'live' && !wasLive) void refreshTiers();
  if (s.connection === 'unauthorized') openToken(true);
}

const live = new LiveSource({
  url: (resumeAfter) => api.streamUrl(resumeAfter),
  headers: () => api.streamHeaders(),
  probe: () => api.probe(),
  hasCredentials: () => api.token !== null,
  onEvent: (e) => {
    if (mode === 'live') ingest(liveBuffer, e, Date.now());
  },
  onStatus: (s) => feed.onLiveStatus(s),
  onInvalid: (err) => console.warn('aquarium: ignored an invalid event:', err.message),
});

const demo = new DemoSource((e) => {
  if (mode === 'live') ingest(liveBuffer, e, Date.now());
});

const feed = new Feed({
  live,
  demo,
  demoAfterMs: DEMO_AFTER_MS,
  forceDemo,
  onStatus: showStatus,
  onDemoEnd: () => {
    // The engine is back (or the time machine starts): nothing synthetic may linger.
    liveBuffer.removeWhere((e) => e.origin === 'demo');
    activity.reset();
    memory.reset();
    navigator_.render();
    mirror.update(activity, memory, clock());
  },
});

// ---------------------------------------------------------------- token

const tokenForm = $<HTMLFormElement>('#token-form');
const tokenToggle = $<HTMLButtonElement>('#token-toggle');
const tokenInput = $<HTMLInputElement>('#token-input');

function openToken(open: boolean): void {
  tokenForm.hidden = !open;
  tokenToggle.setAttribute('aria-expanded', String(open));
  if (open) tokenInput.focus();
}

tokenToggle.addEventListener('click', () => openToken(tokenForm.hidden));
tokenForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const token = tokenInput.value.trim();
  if (!token) return;
  api.token = token;
  saveToken(storage, token);
  tokenInput.value = '';
  openToken(false);
  feed.restart();
});
$('#token-forget').addEventListener('click', () => {
  api.token = null;
  saveToken(storage, null);
  tokenInput.value = '';
  feed.restart();
});

// ---------------------------------------------------------------- time machine

const tmPanel = $('#timemachine');
const tmToggle = $<HTMLButtonElement>('#timemachine-toggle');
const tmSince = $<HTMLInputElement>('#tm-since');
const tmUntil = $<HTMLInputElement>('#tm-until');
const tmSpeed = $<HTMLSelectElement>('#tm-speed');
const tmPlay = $<HTMLButtonElement>('#tm-play');
const tmPause = $<HTMLButtonElement>('#tm-pause');
const tmLive = $<HTMLButtonElement>('#tm-live');
const tmProgress = $<HTMLProgressElement>('#tm-progress');
const tmClock = $<HTMLOutputElement>('#tm-clock');
const tmStatus = $('#tm-status');

/** A Date as the value of a datetime-local input (local time, seconds). */
function toLocalInput(d: Date): string {
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

for (const speed of SPEEDS) {
  const option = document.createElement('option');
  option.value = String(speed);
  option.textContent = `${speed}×`;
  tmSpeed.append(option);
}
tmSpeed.value = '10';

function openTimeMachine(open: boolean): void {
  tmPanel.hidden = !open;
  tmToggle.setAttribute('aria-expanded', String(open));
  if (open && !tmSince.value) {
    const now = new Date();
    tmSince.value = toLocalInput(new Date(now.getTime() - 15 * 60_000));
    tmUntil.value = toLocalInput(now);
  }
}

tmToggle.addEventListener('click', () => openTimeMachine(tmPanel.hidden));

function enterReplay(): void {
  if (mode === 'replay') return;
  mode = 'replay';
  document.body.dataset['mode'] = 'replay';
  feed.pause();
}

function leaveReplay(): void {
  timeMachine.stop();
  if (mode === 'live') return;
  mode = 'live';
  document.body.dataset['mode'] = 'live';
  activity.reset();
  memory.reset();
  navigator_.setBuffer(liveBuffer);
  feed.start(); // the stream's catch-up brings back what happened meanwhile
  mirror.update(activity, memory, clock());
}

tmPlay.addEventListener('click', () => {
  const since = new Date(tmSince.value);
  const until = new Date(tmUntil.value);
  if (Number.isNaN(since.getTime()) || Number.isNaN(until.getTime())) {
    tmStatus.textContent = 'choose both ends of the range';
    return;
  }
  enterReplay();
  activity.reset();
  memory.reset();
  replayBuffer.clear();
  navigator_.setBuffer(replayBuffer);
  // The tiers as they are now: the engine keeps no past counts; the replay moves dots.
  void api
    .tierStats()
    .then((stats) => memory.applyStats(stats, Date.now(), Date.now(), false))
    .catch(() => undefined);
  void timeMachine.play(since, until, Number(tmSpeed.value));
});

tmPause.addEventListener('click', () => {
  if (timeMachine.state === 'playing') timeMachine.pause();
  else if (timeMachine.state === 'paused') timeMachine.resume();
});
tmSpeed.addEventListener('change', () => timeMachine.setSpeed(Number(tmSpeed.value)));
tmLive.addEventListener('click', () => leaveReplay());

function showReplay(s: ReplayStatus): void {
  tmPanel.dataset['replayState'] = s.state;
  tmPanel.dataset['replayTotal'] = String(s.total);
  tmPanel.dataset['replayPlayed'] = String(s.played);
  tmProgress.value = s.total ? s.played / s.total : s.state === 'done' ? 1 : 0;
  tmClock.textContent = s.virtualNow !== null ? new Date(s.virtualNow).toLocaleString() : '';
  tmPause.disabled = !(s.state === 'playing' || s.state === 'paused');
  tmPause.textContent = s.state === 'paused' ? 'Resume' : 'Pause';
  const from = s.source ? ` from ${s.source}` : '';
  const more = s.truncated ? ' (the range holds more; the first were kept)' : '';
  tmStatus.textContent =
    s.state === 'loading'
      ? 'loading the range…'
      : s.state === 'error'
        ? `could not replay: ${s.error ?? 'unknown error'}`
        : s.state === 'idle'
          ? ''
          : `${s.played} of ${s.total} events${from}${more}${s.state === 'done' ? ' — done' : ''}`;
  mirror.update(activity, memory, clock());
}

// ---------------------------------------------------------------- go

const canvas = $<HTMLCanvasElement>('#aquarium');
const scene = mountScene(
  canvas,
  CREATURES,
  {
    activity,
    memory,
    clock,
    realClock: () => Date.now(),
    banner: () => (mode === 'replay' ? 'REPLAY' : feed.status().demo ? 'DEMO' : null),
    highlighted: () => highlighted,
  },
  (layout) => mirror.placed(layout),
);
canvas.addEventListener('click', (ev) => {
  const rect = canvas.getBoundingClientRect();
  const c = scene.creatureAt(ev.clientX - rect.left, ev.clientY - rect.top);
  navigator_.filterCreature(c && c.name !== highlighted ? c.name : null);
});


setInterval(() => {
  mirror.update(activity, memory, clock());
  if (lastStatus) connectionText.textContent = describe(lastStatus);
}, 250);
setInterval(() => void refreshTiers(), TIERS_EVERY_MS);
if (!api.token && !forceDemo) openToken(true);
feed.start();
