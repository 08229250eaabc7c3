// The event navigator: the feed's recent events (newest first) as a keyboard-navigable
// list, filters by creature and event type, and the details of the chosen event (its data
// and reasoning). Each row carries data attributes the browser tests read.
import type { EventBuffer } from './buffer';
import { CREATURES, ZONES } from './creatures';
import { EVENT_TYPES, type AquariumEvent } from './events';

/** Rows rendered at most; the buffer keeps more. */
export const MAX_ROWS = 200;

export interface NavigatorElements {
  list: HTMLOListElement;
  details: HTMLElement;
  creatureFilter: HTMLSelectElement;
  typeFilter: HTMLSelectElement;
  count: HTMLElement;
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

export function timeLabel(ts: number): string {
  const d = new Date(ts);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export class Navigator {
  private buffer: EventBuffer;
  private readonly rows = new Map<string, HTMLLIElement>();
  private readonly animated = new Map<string, boolean>();
  private selected: AquariumEvent | null = null;
  private renderQueued = false;
  creature: string | null = null;
  eventType: string | null = null;

  constructor(
    private readonly els: NavigatorElements,
    buffer: EventBuffer,
    private readonly onCreatureFilter: (name: string | null) => void = () => {},
  ) {
    this.buffer = buffer;
    this.fillFilters();
    els.creatureFilter.addEventListener('change', () => {
      this.creature = els.creatureFilter.value || null;
      this.onCreatureFilter(this.creature);
      this.render();
    });
    els.typeFilter.addEventListener('change', () => {
      this.eventType = els.typeFilter.value || null;
      this.render();
    });
    els.list.addEventListener('keydown', (ev) => this.onKey(ev));
    this.showDetails(null);
  }

  private fillFilters(): void {
    const { creatureFilter, typeFilter } = this.els;
    creatureFilter.replaceChildren(el('option', { value: '' }, 'every creature'));
    for (const zone of ZONES) {
      const group = el('optgroup', { label: zone });
      for (const c of CREATURES.filter((x) => x.zone === zone)) group.append(el('option', { value: c.name }, c.name));
      creatureFilter.append(group);
    }
    typeFilter.replaceChildren(el('option', { value: '' }, 'every type'));
    for (const t of EVENT_TYPES) typeFilter.append(el('option', { value: t }, t));
  }

  /** Show another buffer (live ↔ replay). */
  setBuffer(buffer: EventBuffer): void {
    this.buffer = buffer;
    this.selected = null;
    this.showDetails(null);
    this.render();
  }

  /** Filter by creature from elsewhere (a click on the canvas); null clears it. */
  filterCreature(name: string | null): void {
    this.creature = name;
    this.els.creatureFilter.value = name ?? '';
    this.onCreatureFilter(name);
    this.render();
  }

  /** Record whether an event animated (catch-up and history do not), then re-render soon. */
  added(event: AquariumEvent, animated: boolean): void {
    this.animated.set(event.event_id, animated);
    if (this.animated.size > 4 * this.buffer.capacity) {
      for (const id of this.animated.keys()) {
        if (!this.buffer.has(id)) this.animated.delete(id);
      }
    }
    this.queueRender();
  }

  queueRender(): void {
    if (this.renderQueued) return;
    this.renderQueued = true;
    const run = (): void => {
      this.renderQueued = false;
      this.render();
    };
    // Coalesce bursts (a catch-up of 50) into one render; a hidden tab still renders.
    if (document.hidden) setTimeout(run, 100);
    else requestAnimationFrame(run);
  }

  private matches = (e: AquariumEvent): boolean =>
    (!this.creature || e.creature === this.creature) && (!this.eventType || e.event_type === this.eventType);

  /** Keyed render: existing rows are reused (focus survives), new ones created. */
  render(): void {
    const events = this.buffer.latest(MAX_ROWS, this.matches);
    const wanted = new Set(events.map((e) => e.event_id));
    for (const [id, row] of this.rows) {
      if (!wanted.has(id)) {
        row.remove();
        this.rows.delete(id);
      }
    }
    let previous: HTMLLIElement | null = null;
    for (const e of events) {
      let row = this.rows.get(e.event_id);
      if (!row) {
        row = this.row(e);
        this.rows.set(e.event_id, row);
      }
      const expected: ChildNode | null = previous ? previous.nextSibling : this.els.list.firstChild;
      if (expected !== row) this.els.list.insertBefore(row, expected);
      previous = row;
    }
    this.els.list.dataset['rows'] = String(events.length);
    this.els.count.textContent = `${events.length}${this.buffer.size > events.length ? ` of ${this.buffer.size}` : ''}`;
  }

  private row(e: AquariumEvent): HTMLLIElement {
    const animated = this.animated.get(e.event_id) ?? false;
    const li = el('li', {
      'data-event-id': e.event_id,
      'data-creature': e.creature,
      'data-event-type': e.event_type,
      'data-origin': e.origin,
      'data-animated': String(animated),
      class: `ev ev-${e.event_type}`,
    });
    const button = el('button', { type: 'button', 'aria-pressed': String(this.selected?.event_id === e.event_id) });
    button.append(
      el('time', { datetime: e.timestamp }, timeLabel(e.ts)),
      el('span', { class: 'ev-creature' }, e.creature),
      el('span', { class: 'ev-type' }, e.event_type),
    );
    if (!animated) button.append(el('span', { class: 'ev-tag', title: 'older than 30 s when it arrived: listed, not animated' }, 'earlier'));
    if (e.origin === 'demo') button.append(el('span', { class: 'ev-tag ev-demo' }, 'demo'));
    button.addEventListener('click', () => this.select(e));
    li.append(button);
    return li;
  }

  select(e: AquariumEvent | null): void {
    this.selected = e;
    for (const [id, row] of this.rows) {
      row.querySelector('button')?.setAttribute('aria-pressed', String(id === e?.event_id));
    }
    this.showDetails(e);
  }

  private showDetails(e: AquariumEvent | null): void {
    const d = this.els.details;
    d.replaceChildren();
    if (!e) {
      d.dataset['eventId'] = '';
      d.append(el('p', { class: 'muted' }, 'Choose an event to see its data and reasoning.'));
      return;
    }
    d.dataset['eventId'] = e.event_id;
    d.append(el('h3', {}, `${e.creature} · ${e.event_type}`));
    const dl = el('dl');
    const field = (k: string, v: string): void => {
      dl.append(el('dt', {}, k), el('dd', {}, v));
    };
    field('time', e.timestamp);
    field('zone', e.zone);
    field('service', `${e.service} / ${e.process}`);
    field('session', e.session_id ?? '—');
    field('event id', e.event_id);
    if (e.origin !== 'live') field('origin', e.origin === 'demo' ? 'demo (synthetic)' : 'time machine');
    d.append(dl);
    d.append(el('h4', {}, 'reasoning'));
    d.append(el('p', { class: 'reasoning' }, e.reasoning ?? '—'));
    d.append(el('h4', {}, 'data'));
    d.append(el('pre', { class: 'data' }, JSON.stringify(e.data, null, 2)));
  }

  private onKey(ev: KeyboardEvent): void {
    if (!['ArrowDown', 'ArrowUp', 'Home', 'End'].includes(ev.key)) return;
    const buttons = [...this.els.list.querySelectorAll<HTMLButtonElement>('button')];
    if (!buttons.length) return;
    const i = buttons.indexOf(document.activeElement as HTMLButtonElement);
    const next =
      ev.key === 'Home' ? 0 : ev.key === 'End' ? buttons.length - 1 : ev.key === 'ArrowDown' ? Math.min(buttons.length - 1, i + 1) : Math.max(0, i - 1);
    buttons[next]?.focus();
    ev.preventDefault();
  }
}
