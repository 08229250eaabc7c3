// The demo's synthetic events: plausible flows through the pipeline (a conversation heard
// and remembered, a question answered, Annie talking, a night's consolidation), generated
// deterministically from a seed. Every event is marked data.demo = true and origin 'demo'.
import { CREATURE, type CreatureName } from './creatures';
import { parseEvent, CREATURE_BY_NAME, type AquariumEvent, type EventType, type JsonValue } from './events';
import type { Tier, TierStats } from './memory';

/** mulberry32: a small, fast, seeded PRNG (deterministic demo, reproducible tests). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Step {
  /** ms after the scenario starts */
  at: number;
  creature: CreatureName;
  type: EventType;
  data?: Record<string, JsonValue>;
  reasoning?: string;
}

type Rand = () => number;
const pick = <T>(rand: Rand, items: readonly T[]): T => items[Math.floor(rand() * items.length)] as T;
const int = (rand: Rand, lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1));

const PEOPLE = ['Priya', 'Asha', 'Ravi', 'Meera', 'Arjun', 'Lena', 'Tom'] as const;
const PLACES = ['Koramangala', 'Lisbon', 'Pune', 'the bakery', 'the office'] as const;
const EMOTIONS = ['neutral', 'happy', 'calm', 'excited', 'tired'] as const;
const ENTITY_TYPES = ['person', 'place', 'promise', 'habit', 'event'] as const;
/** The engine's LLM creatures: one per model family, and kelpie for any other (ADR 0021). */
const ENGINE_LLMS = [CREATURE.LION, CREATURE.UNICORN, CREATURE.FAIRY, CREATURE.PEGASUS, CREATURE.WEREWOLF, CREATURE.KELPIE] as const;
/** Annie's responders: Claude, an OpenAI-compatible server, no model at all. */
const RESPONDERS = [CREATURE.CENTAUR, CREATURE.MINOTAUR, CREATURE.LANTERNFISH] as const;
/** Annie's tools and the creature of each (search and fetch have their own; griffin runs the rest). */
const TOOLS: ReadonlyArray<readonly [string, CreatureName]> = [
  ['web_search', CREATURE.CHIMERA],
  ['fetch_webpage', CREATURE.SELKIE],
  ['render_table', CREATURE.GRIFFIN],
  ['render_chart', CREATURE.GRIFFIN],
  ['think', CREATURE.GRIFFIN],
  ['execute_python', CREATURE.GRIFFIN],
];

function conversation(rand: Rand, session: string): Step[] {
  const words = int(rand, 12, 80);
  const speakers = int(rand, 1, 3);
  const who = pick(rand, PEOPLE);
  const where = pick(rand, PLACES);
  const llm = pick(rand, ENGINE_LLMS);
  let t = 0;
  const next = (lo: number, hi: number): number => (t += int(rand, lo, hi));
  const steps: Step[] = [
    { at: t, creature: CREATURE.JELLYFISH, type: 'start', data: { clip_s: 30 }, reasoning: 'wearable audio buffered into a clip' },
    { at: next(100, 300), creature: CREATURE.SEAHORSE, type: 'start' },
    { at: next(200, 500), creature: CREATURE.SEAHORSE, type: 'complete', data: { speech_s: int(rand, 5, 28) } },
    { at: next(50, 150), creature: CREATURE.SIREN, type: 'start' },
    { at: next(600, 1500), creature: CREATURE.SIREN, type: 'complete', data: { words, rtf: Math.round(rand() * 50) / 1000 } },
    { at: next(50, 150), creature: CREATURE.CUTTLEFISH, type: 'start' },
    { at: next(300, 800), creature: CREATURE.CUTTLEFISH, type: 'complete', data: { speakers } },
    { at: next(50, 150), creature: CREATURE.CERBERUS, type: 'complete', data: { named: [who] }, reasoning: `the voice matches ${who}'s enrollment` },
    { at: next(100, 300), creature: CREATURE.HYDRA, type: 'complete', data: { emotion: pick(rand, EMOTIONS) } },
    { at: next(50, 100), creature: CREATURE.JELLYFISH, type: 'complete' },
    { at: next(200, 500), creature: CREATURE.OWL, type: 'metric', data: { new_lines: int(rand, 1, 6) } },
    { at: next(50, 150), creature: CREATURE.OUROBOROS, type: 'start' },
    { at: next(200, 600), creature: CREATURE.OUROBOROS, type: 'complete', data: { segments: int(rand, 1, 9) } },
    { at: next(300, 900), creature: CREATURE.KRAKEN, type: 'start' },
    { at: next(100, 300), creature: llm, type: 'start' },
    { at: next(800, 2000), creature: llm, type: 'complete', data: { tokens: int(rand, 200, 900) } },
    {
      at: next(100, 300),
      creature: CREATURE.KRAKEN,
      type: 'complete',
      data: { entities: [who, where] },
      reasoning: `${who} and ${where} were mentioned`,
    },
    { at: next(100, 300), creature: CREATURE.MANTA, type: 'start' },
    { at: next(300, 900), creature: CREATURE.MANTA, type: 'complete', data: { facts: int(rand, 1, 4) } },
    { at: next(100, 300), creature: CREATURE.EEL, type: 'start' },
    { at: next(300, 800), creature: CREATURE.EEL, type: 'complete', data: { vectors: int(rand, 1, 9) } },
  ];
  return steps.map((s) => ({ ...s, data: { ...s.data, session: session } }));
}

function question(rand: Rand): Step[] {
  const q = pick(rand, ['when did Priya move?', 'what did I promise Ravi?', 'who likes coffee?']);
  let t = 0;
  const next = (lo: number, hi: number): number => (t += int(rand, lo, hi));
  const legs: Step[] = [];
  const base = next(50, 150);
  for (const leg of [CREATURE.STARFISH, CREATURE.SHARK, CREATURE.SQUID]) {
    legs.push({ at: base, creature: leg, type: 'start', data: { query: q } });
    legs.push({ at: base + int(rand, 20, 400), creature: leg, type: 'complete', data: { hits: int(rand, 0, 12) } });
  }
  return [
    { at: 0, creature: CREATURE.BASILISK, type: 'metric', data: { path: '/v1/context', allowed: true } },
    ...legs,
    { at: base + 450, creature: CREATURE.PUFFERFISH, type: 'start' },
    { at: base + 520, creature: CREATURE.PUFFERFISH, type: 'complete', data: { results: int(rand, 1, 5) }, reasoning: 'weighted RRF of three legs' },
  ];
}

function annie(rand: Rand): Step[] {
  let t = 0;
  const next = (lo: number, hi: number): number => (t += int(rand, lo, hi));
  const [tool, toolCreature] = pick(rand, TOOLS);
  const llm = pick(rand, RESPONDERS);
  const rendered: Step[] =
    tool === 'render_table' || tool === 'render_chart'
      ? [{ at: next(50, 150), creature: CREATURE.NYMPH, type: 'metric', data: { kind: tool === 'render_table' ? 'table' : 'chart' } }]
      : [];
  return [
    { at: t, creature: CREATURE.GARGOYLE, type: 'start', reasoning: 'the browser connected over WebRTC' },
    { at: next(50, 150), creature: CREATURE.LUNA_MOTH, type: 'start', reasoning: 'a voice session began' },
    { at: next(50, 150), creature: CREATURE.MERMAID, type: 'start' },
    { at: next(100, 300), creature: CREATURE.SPHINX, type: 'start' },
    { at: next(300, 800), creature: CREATURE.SPHINX, type: 'complete', data: { memories: int(rand, 2, 8) } },
    { at: next(500, 1500), creature: CREATURE.SERPENT, type: 'complete', data: { chars: int(rand, 10, 80) } },
    { at: next(100, 300), creature: llm, type: 'start' },
    { at: next(300, 900), creature: toolCreature, type: 'start', data: { tool } },
    { at: next(300, 1200), creature: toolCreature, type: 'complete', data: { tool } },
    ...rendered,
    { at: next(600, 1800), creature: llm, type: 'complete', data: { tokens: int(rand, 40, 300) } },
    { at: next(100, 300), creature: CREATURE.LEVIATHAN, type: 'start' },
    { at: next(1000, 3000), creature: CREATURE.LEVIATHAN, type: 'complete' },
    { at: next(2000, 5000), creature: CREATURE.LUNA_MOTH, type: 'complete', data: { turns: int(rand, 1, 6) } },
    { at: next(50, 150), creature: CREATURE.GARGOYLE, type: 'complete' },
  ];
}

function consolidation(rand: Rand, run: number, entityIds: () => number): Step[] {
  const changes: JsonValue[] = [];
  const n = int(rand, 1, 4);
  for (let i = 0; i < n; i++) {
    const from: Tier = pick(rand, ['L0', 'L0', 'L1'] as const);
    const to: Tier = from === 'L0' ? 'L1' : pick(rand, ['L2', 'L0'] as const);
    changes.push({
      id: entityIds(),
      name: pick(rand, [...PEOPLE, ...PLACES]),
      type: pick(rand, ENTITY_TYPES),
      from,
      to,
      reason: to > from ? 'seen in enough sessions' : 'not seen for a while',
    });
  }
  return [
    { at: 0, creature: CREATURE.SALMON, type: 'start', data: { run_id: run, entities: int(rand, 40, 400) } },
    { at: 300, creature: CREATURE.CORAL, type: 'start' },
    { at: 900, creature: CREATURE.CORAL, type: 'complete', data: { communities: int(rand, 2, 12) } },
    { at: 1200, creature: CREATURE.SEA_CUCUMBER, type: 'metric', data: { run_id: run, processed: 100, total: 200 } },
    { at: 1500, creature: CREATURE.SALMON, type: 'metric', data: { run_id: run, changes, changes_total: n } },
    { at: 2000, creature: CREATURE.SEA_CUCUMBER, type: 'metric', data: { run_id: run, processed: 200, total: 200 } },
    { at: 2400, creature: CREATURE.SALMON, type: 'complete', data: { run_id: run, promoted: n } },
    { at: 2600, creature: CREATURE.PHOENIX, type: 'start' },
    { at: 3600, creature: CREATURE.PHOENIX, type: 'complete', data: { reason: 'new' } },
  ];
}

function chores(rand: Rand, session: string): Step[] {
  return pick(rand, [
    [
      { at: 0, creature: CREATURE.STINGRAY, type: 'start', data: { session } },
      { at: int(rand, 2000, 4000), creature: CREATURE.STINGRAY, type: 'complete', data: { session, segments: int(rand, 3, 20) } },
    ],
    [
      { at: 0, creature: CREATURE.NARWHAL, type: 'metric', data: { streamed: int(rand, 10, 500) } },
      { at: 50, creature: CREATURE.DRAGON, type: 'metric', data: { pool: 'main', checked_out: int(rand, 0, 5), size: 5 } },
    ],
    [{ at: 0, creature: CREATURE.BASILISK, type: 'error', data: { path: '/v1/context' }, reasoning: 'a request with a wrong token' }],
  ] as Step[][]);
}

export interface SyntheticOptions {
  seed?: number;
  /** Probability that a scenario fails at one of its steps (an error event, then it stops). */
  errorRate?: number;
  /** Idle time between scenarios, ms. */
  gapMs?: [number, number];
}

interface Pending {
  at: number;
  step: Step;
}

export class SyntheticGenerator {
  private readonly rand: Rand;
  private readonly errorRate: number;
  private readonly gap: [number, number];
  private queue: Pending[] = [];
  private nextScenarioAt: number | null = null;
  private sessions = 0;
  private runs = 0;
  private entity = 1000;

  constructor(opts: SyntheticOptions = {}) {
    this.rand = mulberry32(opts.seed ?? 0x5eed);
    this.errorRate = opts.errorRate ?? 0.08;
    this.gap = opts.gapMs ?? [300, 2500];
  }

  private eventId(): string {
    let s = '';
    for (let i = 0; i < 4; i++) s += Math.floor(this.rand() * 0x100000000).toString(16).padStart(8, '0');
    return s;
  }

  private scenario(): Step[] {
    const r = this.rand();
    const session = `demo-${++this.sessions}`;
    if (r < 0.4) return conversation(this.rand, session);
    if (r < 0.65) return question(this.rand);
    if (r < 0.82) return annie(this.rand);
    if (r < 0.9) return consolidation(this.rand, ++this.runs, () => ++this.entity);
    return chores(this.rand, session);
  }

  private schedule(start: number): void {
    let steps = this.scenario();
    if (steps.length > 1 && this.rand() < this.errorRate) {
      // Fail at one step: it becomes an error and the flow stops there.
      const at = 1 + Math.floor(this.rand() * (steps.length - 1));
      const failed = steps[at] as Step;
      steps = [
        ...steps.slice(0, at),
        { ...failed, type: 'error', data: { ...failed.data, error: 'synthetic failure' }, reasoning: 'the demo shows what an error looks like' },
      ];
    }
    for (const step of steps) this.queue.push({ at: start + step.at, step });
    this.queue.sort((a, b) => a.at - b.at);
    const last = this.queue[this.queue.length - 1]?.at ?? start;
    this.nextScenarioAt = Math.min(last, start + 1500) + int(this.rand, this.gap[0], this.gap[1]);
  }

  /** Events due at or before `now`, in time order (call repeatedly with a rising clock). */
  tick(now: number): AquariumEvent[] {
    if (this.nextScenarioAt === null) this.nextScenarioAt = now;
    while (this.nextScenarioAt !== null && this.nextScenarioAt <= now) this.schedule(this.nextScenarioAt);
    const out: AquariumEvent[] = [];
    while (this.queue.length && (this.queue[0] as Pending).at <= now) {
      const { at, step } = this.queue.shift() as Pending;
      out.push(this.build(at, step));
    }
    return out;
  }

  private build(at: number, step: Step): AquariumEvent {
    const creature = CREATURE_BY_NAME.get(step.creature);
    if (!creature) throw new Error(`synthetic: unknown creature ${step.creature}`);
    const session = step.data?.['session'];
    return parseEvent(
      {
        schema_version: 1,
        event_id: this.eventId(),
        timestamp: new Date(at).toISOString(),
        service: creature.service,
        process: creature.process,
        creature: creature.name,
        zone: creature.zone,
        event_type: step.type,
        session_id: typeof session === 'string' ? session : null,
        data: { ...step.data, demo: true },
        reasoning: step.reasoning ?? null,
      },
      'demo',
    );
  }
}

/** Tier counts for the demo's memory zone (the engine's are unknown while it is away). */
export function syntheticTierStats(): TierStats {
  const tier = (count: number, mean: number) => ({ count, low_salience: Math.round(count / 8), contradicted: 0, mean_salience: mean });
  return {
    total: 214,
    tiers: { L0: tier(160, 0.31), L1: tier(46, 0.58), L2: tier(8, 0.83) },
    communities: 9,
    recent_changes: [],
  };
}
