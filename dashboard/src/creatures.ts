// Typed view of the creature registry. The data comes from the Python registry
// (her_os_shared.creatures) via scripts/export_creatures.py; never edit it by hand.
// Code names a creature only through CREATURE (CREATURE.OWL), never as a string (ADR 0021).
import { CREATURE } from './creature-names.generated';
import generated from './creatures.generated.json';

export { CREATURE, type CreatureName } from './creature-names.generated';

/** Zones in the order a memory flows through them; the layout draws them in this order. */
export const ZONES = ['listening', 'thinking', 'acting'] as const;
export type Zone = (typeof ZONES)[number];

/** Whose creature it is: one of the design's 27, or the project's own (ADR 0021). */
export const ORIGINS = ['design', 'project'] as const;
export type Origin = (typeof ORIGINS)[number];

export interface Creature {
  readonly name: string;
  readonly zone: Zone;
  readonly service: string;
  readonly process: string;
  readonly origin: Origin;
  readonly description: string;
}

function isOrigin(value: unknown): value is Origin {
  return typeof value === 'string' && (ORIGINS as readonly string[]).includes(value);
}

function isZone(value: unknown): value is Zone {
  return typeof value === 'string' && (ZONES as readonly string[]).includes(value);
}

/**
 * Validate the generated JSON at load time: if the Python registry ever gains a zone or
 * changes shape, the dashboard fails loudly (and its tests fail) instead of drawing nonsense.
 */
export function parseCreatures(data: unknown): Creature[] {
  if (!Array.isArray(data)) throw new Error('creature registry: expected a list');
  const seen = new Set<string>();
  return data.map((item: unknown, i) => {
    if (typeof item !== 'object' || item === null) {
      throw new Error(`creature registry: entry ${i} is not an object`);
    }
    const r = item as Record<string, unknown>;
    for (const key of ['name', 'zone', 'service', 'process', 'origin', 'description'] as const) {
      if (typeof r[key] !== 'string') {
        throw new Error(`creature registry: entry ${i} has no string ${key}`);
      }
    }
    const name = r['name'] as string;
    if (!isZone(r['zone'])) throw new Error(`creature registry: ${name} has unknown zone`);
    if (!isOrigin(r['origin'])) throw new Error(`creature registry: ${name} has unknown origin`);
    if (seen.has(name)) throw new Error(`creature registry: duplicate creature ${name}`);
    seen.add(name);
    return {
      name,
      zone: r['zone'],
      service: r['service'] as string,
      process: r['process'] as string,
      origin: r['origin'],
      description: r['description'] as string,
    };
  });
}

/** The registry's names must be exactly CREATURE's: both files come from one export. */
export function checkNames(creatures: readonly Creature[], names: readonly string[]): void {
  const have = new Set(creatures.map((c) => c.name));
  const missing = names.filter((n) => !have.has(n));
  const extra = [...have].filter((n) => !names.includes(n));
  if (missing.length || extra.length) {
    throw new Error(`creature registry: names differ from CREATURE (missing ${missing.join(', ') || '-'}; extra ${extra.join(', ') || '-'})`);
  }
}

export const CREATURES: readonly Creature[] = Object.freeze(parseCreatures(generated));
checkNames(CREATURES, Object.values(CREATURE));

export function countByZone(creatures: readonly Creature[]): Record<Zone, number> {
  const counts: Record<Zone, number> = { listening: 0, thinking: 0, acting: 0 };
  for (const c of creatures) counts[c.zone] += 1;
  return counts;
}
