// The engine's HTTP API as the dashboard uses it (docs/api.md): the event stream's request,
// the stored events for the time machine, the memory tiers, and a probe that tells "wrong
// token" from "engine unreachable". The token always travels in the X-Internal-Token header.
import { parseEvent, type AquariumEvent } from './events';
import { parseTierStats, type TierStats } from './memory';

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** The header every /v1 request carries the token in (never the URL). */
export const TOKEN_HEADER = 'X-Internal-Token';

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

export type Reachability = 'reachable' | 'unauthorized' | 'unreachable';

export interface EventQuery {
  since?: string;
  until?: string;
  creature?: string;
  event_type?: string;
  limit?: number;
  offset?: number;
}

export interface EventPage {
  events: AquariumEvent[];
  /** Items of the page that were not valid events (counted, not shown). */
  invalid: number;
  source: string | null;
  /** The offset of the next page; null when this was the last (undefined: not said). */
  nextOffset?: number | null;
}

/** The largest page GET /v1/events serves. */
export const MAX_PAGE = 1000;

export class EngineApi {
  constructor(
    readonly baseUrl: string,
    private tokenValue: string | null,
    private readonly fetcher: FetchLike = (input, init) => fetch(input, init),
  ) {}

  get token(): string | null {
    return this.tokenValue;
  }

  set token(value: string | null) {
    this.tokenValue = value;
  }

  /**
   * The event stream's URL, without the token (a URL lands in proxies' and servers' access
   * logs: the token goes in `streamHeaders`); with `resumeAfter` the engine sends the events
   * after that one (if it still holds it). An event id is no secret.
   */
  streamUrl(resumeAfter: string | null = null): string {
    const qs = resumeAfter ? `?${new URLSearchParams({ last_event_id: resumeAfter }).toString()}` : '';
    return `${this.baseUrl}/v1/events/stream${qs}`;
  }

  /** The event stream's request headers: the token, as every other /v1 request sends it. */
  streamHeaders(): Record<string, string> {
    return this.tokenValue ? { [TOKEN_HEADER]: this.tokenValue } : {};
  }

  private async get(path: string, params: Record<string, string | number | undefined> = {}): Promise<Response> {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') search.set(k, String(v));
    const qs = search.toString();
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (this.tokenValue) headers[TOKEN_HEADER] = this.tokenValue;
    try {
      return await this.fetcher(`${this.baseUrl}${path}${qs ? `?${qs}` : ''}`, { headers, cache: 'no-store' });
    } catch (err) {
      throw new ApiError(`engine unreachable: ${err instanceof Error ? err.message : String(err)}`, null);
    }
  }

  private async json(path: string, params?: Record<string, string | number | undefined>): Promise<unknown> {
    const res = await this.get(path, params);
    if (!res.ok) {
      const what = res.status === 401 ? 'the token was refused' : `HTTP ${res.status}`;
      throw new ApiError(`${path}: ${what}`, res.status);
    }
    return res.json();
  }

  /** Tell a refused token from an engine that is down, restarting or not proxied. */
  async probe(): Promise<Reachability> {
    try {
      const res = await this.get('/v1/events', { limit: 1 });
      if (res.status === 401 || res.status === 403) return 'unauthorized';
      // 5xx: the proxy could not reach the engine (502/500), or it is starting (503).
      if (res.status >= 500) return 'unreachable';
      return 'reachable';
    } catch {
      return 'unreachable';
    }
  }

  async events(query: EventQuery): Promise<EventPage> {
    const body = await this.json('/v1/events', { ...query });
    const record = (body ?? {}) as Record<string, unknown>;
    const items = Array.isArray(record['events']) ? (record['events'] as unknown[]) : [];
    const events: AquariumEvent[] = [];
    let invalid = 0;
    for (const item of items) {
      try {
        events.push(parseEvent(item, 'replay'));
      } catch {
        invalid++;
      }
    }
    const source = typeof record['source'] === 'string' ? record['source'] : null;
    const next = record['next_offset'];
    const page: EventPage = { events, invalid, source };
    if (next === null || typeof next === 'number') page.nextOffset = next;
    return page;
  }

  async tierStats(): Promise<TierStats> {
    return parseTierStats(await this.json('/v1/tiers/stats'));
  }
}
