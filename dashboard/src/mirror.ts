// The scene in words: a visually hidden list of every creature with its state, and the
// memory tiers with their counts and recent moves. Screen readers get what the canvas shows;
// browser tests read the same data attributes instead of guessing from pixels.
import type { Activity } from './activity';
import type { Creature } from './creatures';
import { bodyCentre } from './draw';
import type { Layout } from './layout';
import { TIER_LABEL, TIERS, type MemoryModel } from './memory';

export class Mirror {
  private readonly items = new Map<string, HTMLLIElement>();
  private readonly tierItems = new Map<string, HTMLLIElement>();
  private movesKey = '';

  constructor(
    creatures: readonly Creature[],
    list: HTMLUListElement,
    private readonly tierList: HTMLUListElement,
    private readonly moveList: HTMLOListElement,
  ) {
    for (const c of creatures) {
      const li = document.createElement('li');
      li.dataset['creature'] = c.name;
      li.dataset['zone'] = c.zone;
      li.dataset['state'] = 'idle';
      li.dataset['animated'] = '0';
      li.dataset['seen'] = '0';
      li.textContent = `${c.name} (${c.zone}, ${c.description}): idle`;
      this.items.set(c.name, li);
      list.append(li);
    }
    for (const tier of TIERS) {
      const li = document.createElement('li');
      li.dataset['tier'] = tier;
      li.dataset['count'] = '0';
      this.tierItems.set(tier, li);
      tierList.append(li);
    }
  }

  /** Body centres in CSS pixels of the canvas, for pixel checks. */
  placed(scene: Layout): void {
    for (const p of scene.placements) {
      const li = this.items.get(p.creature.name);
      if (!li) continue;
      const c = bodyCentre(p);
      li.dataset['x'] = c.x.toFixed(1);
      li.dataset['y'] = c.y.toFixed(1);
      li.dataset['r'] = p.r.toFixed(1);
    }
  }

  /** Write what changed (cheap enough to call several times a second). */
  update(activity: Activity, memory: MemoryModel, now: number): void {
    for (const [name, li] of this.items) {
      const state = activity.state(name, now);
      const life = activity.life(name);
      const animated = String(life?.animated ?? 0);
      const seen = String(life?.seen ?? 0);
      if (li.dataset['state'] !== state || li.dataset['animated'] !== animated || li.dataset['seen'] !== seen) {
        li.dataset['state'] = state;
        li.dataset['animated'] = animated;
        li.dataset['seen'] = seen;
        li.dataset['lastType'] = life?.lastType ?? '';
        li.textContent = `${name} (${li.dataset['zone']}): ${state}${life?.lastType ? `, last event ${life.lastType}` : ''}`;
      }
    }
    for (const tier of TIERS) {
      const li = this.tierItems.get(tier);
      const count = String(memory.counts[tier]);
      if (li && (li.dataset['count'] !== count || !li.textContent)) {
        li.dataset['count'] = count;
        li.textContent = `${TIER_LABEL[tier]}: ${count} entities`;
      }
    }
    this.tierList.dataset['loaded'] = String(memory.loaded);
    const key = memory.moves.map((m) => m.key).join('|');
    if (key !== this.movesKey) {
      this.movesKey = key;
      this.moveList.replaceChildren(
        ...memory.moves.map((m) => {
          const li = document.createElement('li');
          li.dataset['entity'] = m.name;
          li.dataset['entityId'] = String(m.entityId);
          li.dataset['from'] = m.from;
          li.dataset['to'] = m.to;
          li.dataset['animated'] = String(m.startedAt !== null);
          li.textContent = `${m.name} (${m.type}) moved ${m.from} → ${m.to}${m.reason ? `: ${m.reason}` : ''}`;
          return li;
        }),
      );
    }
  }
}
