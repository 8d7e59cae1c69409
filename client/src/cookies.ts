// A cookie-keeping fetch for Node (scripts, tests, server-side rendering): stores the Set-Cookie answers and sends
// them back, as a browser would for one site. Browsers need none of this (they keep cookies themselves).
import type { FetchLike } from './http.js';

export interface CookieFetch {
  fetch: FetchLike;
  /** The Cookie header value currently held (e.g. for a WebSocket's headers). */
  cookieHeader(): string;
  clear(): void;
}

export interface CookieFetchOptions {
  /** Sent as `Origin` on every request: better-auth refuses state-changing calls without an allowed origin. */
  origin?: string;
  /** The underlying fetch (default: the global one). */
  fetch?: FetchLike;
}

/**
 * One cookie jar for one service (cookies are not scoped by domain or path: use one jar per service).
 * @example
 * // Node: a client that keeps its session between calls.
 * const jar = createCookieFetch();
 * const client = createHeraldClient({ baseURL: 'http://localhost:3001', fetch: jar.fetch });
 */
export function createCookieFetch(options: CookieFetchOptions = {}): CookieFetch {
  const jar = new Map<string, string>();
  const inner: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const cookieFetch: FetchLike = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    if (jar.size > 0) headers.set('cookie', cookieHeader());
    if (options.origin) headers.set('origin', options.origin);
    const res = await inner(input, { ...init, headers });
    for (const line of res.headers.getSetCookie()) {
      const pair = line.split(';', 1)[0] ?? '';
      const eq = pair.indexOf('=');
      if (eq <= 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      // Deletion is an empty value or an expiry in the past (Max-Age=0 or an old Expires).
      const expires = /;\s*expires=([^;]+)/i.exec(line)?.[1];
      const expired =
        /;\s*max-age=(0|-\d+)\s*(;|$)/i.test(line) ||
        (expires !== undefined && Date.parse(expires) < Date.now());
      if (value === '' || expired) jar.delete(name);
      else jar.set(name, value);
    }
    return res;
  };
  return { fetch: cookieFetch, cookieHeader, clear: () => jar.clear() };
}
