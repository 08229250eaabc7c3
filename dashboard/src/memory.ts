// The memory zone: how many entities sit in each tier (L0 episodes, L1 validated facts, L2
// deep patterns) and entities moving between tiers. Counts come from GET /v1/tiers/stats;
// moves come from its recent_changes and from the consolidation creature's metric events, whose
// data.changes lists [{id, name, type, from, to, reason}]. Pure, like activity.ts.
import { isFresh } from './activity';
import { CREATURE } from './creatures';
import type { AquariumEvent } from './events';

export const TIERS = ['L0', 'L1', 'L2'] as const;
export type Tier = (typeof TIERS)[number];

export const TIER_LABEL: Record<Tier, string> = {
  L0: 'L0 episodes',
  L1: 'L1 validated facts',
  L2: 'L2 deep patterns',
};

/** How long a dot takes to swim from one tier band to another. */
export const MOVE_MS = 2_400;
/** Moves remembered for the list beside the scene. */
export const MOVES_KEPT = 12;

export interface TierCount {
  count: number;
  low_salience: number;
  contradicted: number;
  mean_salience: number | null;
}

export interface TierChange {
  entity_id: number;
  name: string;
  type: string;
  from_tier: Tier;
  to_tier: Tier;
  reason: string;
  changed_at: string;
  run_id: number | null;
}

export interface TierStats {
  total: number;
  tiers: Record<Tier, TierCount>;
  communities: number;
  recent_changes: TierChange[];
}

export function isTier(v: unknown): v is Tier {
  return typeof v === 'string' && (TIERS as readonly string[]).includes(v);
}

const num = (v: unknown, fallback = 0): number => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);

/** Read GET /v1/tiers/stats leniently: a missing tier counts 0, a malformed change is skipped. */
export function parseTierStats(value: unknown): TierStats {
  if (typeof value !== 'object' || value === null) throw new Error('tier stats: expected an object');
  const v = value as Record<string, unknown>;
  const rawTiers = (typeof v['tiers'] === 'object' && v['tiers'] !== null ? v['tiers'] : {}) as Record<string, unknown>;
  const tiers = {} as Record<Tier, TierCount>;
  for (const tier of TIERS) {
    const t = (rawTiers[tier] ?? {}) as Record<string, unknown>;
    tiers[tier] = {
      count: num(t['count']),
      low_salience: num(t['low_salience']),
      contradicted: num(t['contradicted']),
      mean_salience: typeof t['mean_salience'] === 'number' ? t['mean_salience'] : null,
    };
  }
  const changes: TierChange[] = [];
  for (const raw of Array.isArray(v['recent_changes']) ? v['recent_changes'] : []) {
    if (typeof raw !== 'object' || raw === null) continue;
    const c = raw as Record<string, unknown>;
    if (!isTier(c['from_tier']) || !isTier(c['to_tier']) || typeof c['changed_at'] !== 'string') continue;
    changes.push({
      entity_id: num(c['entity_id'], -1),
      name: typeof c['name'] === 'string' ? c['name'] : '?',
      type: typeof c['type'] === 'string' ? c['type'] : '',
      from_tier: c['from_tier'],
      to_tier: c['to_tier'],
      reason: typeof c['reason'] === 'string' ? c['reason'] : '',
      changed_at: c['changed_at'],
      run_id: typeof c['run_id'] === 'number' ? c['run_id'] : null,
    });
  }
  return {
    total: num(v['total']),
    tiers,
    communities: num(v['communities']),
    recent_changes: changes,
  };
}

export interface TierMove {
  /** run, entity and the two tiers: the same change from an event and from stats is one move. */
  readonly key: string;
  readonly entityId: number;
  readonly name: string;
  readonly type: string;
  readonly from: Tier;
  readonly to: Tier;
  readonly reason: string;
  /** When the change happened (ms). */
  readonly at: number;
  /** Clock time its dot started to move; null when it was too old to animate. */
  readonly startedAt: number | null;
}

export function moveKey(runId: unknown, entityId: unknown, from: Tier, to: Tier): string {
  return `${String(runId ?? '-')}:${String(entityId)}:${from}>${to}`;
}

export class MemoryModel {
  counts: Record<Tier, number> = { L0: 0, L1: 0, L2: 0 };
  total = 0;
  communities = 0;
  /** True once counts came from the engine (or the demo), not just from events. */
  loaded = false;
  private moveList: TierMove[] = [];
  private readonly keys = new Set<string>();

  get moves(): readonly TierMove[] {
    return this.moveList;
  }

  private addMove(move: TierMove): boolean {
    if (this.keys.has(move.key)) return false;
    this.keys.add(move.key);
    this.moveList.unshift(move);
    if (this.moveList.length > MOVES_KEPT) {
      for (const dropped of this.moveList.splice(MOVES_KEPT)) this.keys.delete(dropped.key);
    }
    return true;
  }

  /**
   * Counts are the engine's word; new recent changes become moves (fresh ones animate),
   * unless `withMoves` is false (the time machine: today's changes are not the replay's).
   */
  applyStats(stats: TierStats, now: number, realNow: number = now, withMoves = true): void {
    for (const tier of TIERS) this.counts[tier] = stats.tiers[tier].count;
    this.total = stats.total;
    this.communities = stats.communities;
    this.loaded = true;
    if (!withMoves) return;
    // Oldest first, so the newest ends up on top of the list.
    const changes = [...stats.recent_changes].sort((a, b) => Date.parse(a.changed_at) - Date.parse(b.changed_at));
    for (const c of changes) {
      const at = Date.parse(c.changed_at);
      this.addMove({
        key: moveKey(c.run_id, c.entity_id, c.from_tier, c.to_tier),
        entityId: c.entity_id,
        name: c.name,
        type: c.type,
        from: c.from_tier,
        to: c.to_tier,
        reason: c.reason,
        at,
        startedAt: Number.isFinite(at) && isFresh(at, now) ? realNow : null,
      });
    }
  }

  /**
   * A consolidation (CREATURE.SALMON) metric with data.changes: each change is a move. A fresh event animates its
   * moves and shifts the counts at once (the next stats refresh confirms them).
   * Returns the number of new moves. `realNow` starts the dots on the wall clock.
   */
  applyEvent(event: AquariumEvent, now: number, realNow: number = now): number {
    if (event.creature !== CREATURE.SALMON || event.event_type !== 'metric') return 0;
    const changes = event.data['changes'];
    if (!Array.isArray(changes)) return 0;
    const fresh = isFresh(event.ts, now);
    let added = 0;
    for (const raw of changes) {
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) continue;
      const c = raw as Record<string, unknown>;
      const from = c['from'];
      const to = c['to'];
      if (!isTier(from) || !isTier(to) || from === to) continue;
      const move: TierMove = {
        key: moveKey(event.data['run_id'], c['id'], from, to),
        entityId: num(c['id'], -1),
        name: typeof c['name'] === 'string' ? c['name'] : '?',
        type: typeof c['type'] === 'string' ? c['type'] : '',
        from,
        to,
        reason: typeof c['reason'] === 'string' ? c['reason'] : '',
        at: event.ts,
        startedAt: fresh ? realNow : null,
      };
      if (!this.addMove(move)) continue;
      added++;
      if (fresh) {
        this.counts[from] = Math.max(0, this.counts[from] - 1);
        this.counts[to] += 1;
      }
    }
    return added;
  }

  /** Moves whose dot is swimming at wall-clock `realNow`, with their progress 0..1. */
  activeMoves(realNow: number): Array<{ move: TierMove; t: number }> {
    const out: Array<{ move: TierMove; t: number }> = [];
    for (const move of this.moveList) {
      if (move.startedAt === null) continue;
      const t = (realNow - move.startedAt) / MOVE_MS;
      if (t >= 0 && t < 1) out.push({ move, t });
    }
    return out;
  }

  reset(): void {
    this.counts = { L0: 0, L1: 0, L2: 0 };
    this.total = 0;
    this.communities = 0;
    this.loaded = false;
    this.moveList = [];
    this.keys.clear();
  }
}
