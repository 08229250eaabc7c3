// A test double of EventSource (imported by *.test.ts only): the test drives it, opening,
// sending messages and failing, and checks what the LiveSource did with them.
import type { EventSourceLike, StreamRequest } from '../source';

export class EventSourceDouble implements EventSourceLike {
  static opened: EventSourceDouble[] = [];
  private readonly listeners = new Map<string, Array<(event: Event) => void>>();
  closed = false;

  readonly url: string;
  readonly headers: Record<string, string>;

  constructor(request: StreamRequest) {
    this.url = request.url;
    this.headers = request.headers;
    EventSourceDouble.opened.push(this);
  }

  static reset(): void {
    EventSourceDouble.opened = [];
  }

  static latest(): EventSourceDouble {
    const last = EventSourceDouble.opened.at(-1);
    if (!last) throw new Error('no EventSource was opened');
    return last;
  }

  addEventListener(type: string, listener: (event: Event) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }

  close(): void {
    this.closed = true;
  }

  private fire(type: string, event: Event): void {
    for (const l of this.listeners.get(type) ?? []) l(event);
  }

  open(): void {
    this.fire('open', new Event('open'));
  }

  fail(): void {
    this.fire('error', new Event('error'));
  }

  /** A message; `name` is the SSE event name ('message' when the stream sets none). */
  send(data: unknown, name = 'message'): void {
    const text = typeof data === 'string' ? data : JSON.stringify(data);
    this.fire(name, new MessageEvent(name, { data: text }));
  }
}
