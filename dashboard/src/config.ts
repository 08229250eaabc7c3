// Where the engine is and how to authenticate: pure functions over the page's URL and a
// storage, so they are tested without a browser.

export const TOKEN_KEY = 'her-os.internal-token';

export interface KeyValueStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/**
 * The engine's base URL. Default: the page's own origin (the dashboard's server proxies
 * /v1 to the engine: vite dev/preview, nginx). A build can point elsewhere with
 * VITE_ENGINE_URL (the engine allows CORS from :5174). Never taken from the page URL: a
 * crafted link must not send the stored token to another host.
 */
export function engineBaseUrl(configured: string | undefined): string {
  const url = (configured ?? '').trim();
  return url.replace(/\/+$/, '');
}

export interface TokenChoice {
  token: string | null;
  /** The page URL without ?token= (so the token leaves the address bar and history). */
  cleanedUrl: string | null;
}

/**
 * The token from `?token=` (which is then remembered) or from storage. A `?token=` wins over a
 * stored one, so opening the link `her-os up` prints always works.
 */
export function chooseToken(href: string, store: KeyValueStore | null): TokenChoice {
  const url = new URL(href);
  const fromUrl = url.searchParams.get('token')?.trim() ?? '';
  if (fromUrl) {
    try {
      store?.setItem(TOKEN_KEY, fromUrl);
    } catch {
      // storage full or denied (private mode): the token still works for this page
    }
    url.searchParams.delete('token');
    return { token: fromUrl, cleanedUrl: url.toString() };
  }
  let stored: string | null = null;
  try {
    stored = store?.getItem(TOKEN_KEY) ?? null;
  } catch {
    stored = null;
  }
  return { token: stored && stored.trim() ? stored.trim() : null, cleanedUrl: null };
}

export function saveToken(store: KeyValueStore | null, token: string | null): void {
  try {
    if (token) store?.setItem(TOKEN_KEY, token);
    else store?.removeItem(TOKEN_KEY);
  } catch {
    // as above: nothing to do but keep it in memory
  }
}

/** `?demo` (any value but 0/false) starts the demo without trying the engine. */
export function demoForced(href: string): boolean {
  const value = new URL(href).searchParams.get('demo');
  return value !== null && !['0', 'false', 'no'].includes(value.toLowerCase());
}
