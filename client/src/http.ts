// JSON requests to Herald's own routes: cookies included (cross-origin deployments too), the contract's error body
// turned into HeraldApiError.
import { errorFromResponse, HeraldApiError } from './errors.js';

export type FetchLike = typeof fetch;

export type QueryValue = string | number | boolean | undefined | null;

export interface RequestOptions {
  query?: Record<string, QueryValue>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface Http {
  readonly baseURL: string;
  readonly fetch: FetchLike;
  url(path: string, query?: Record<string, QueryValue>): string;
  request<T>(method: string, path: string, options?: RequestOptions): Promise<T>;
}

/** '' and trailing slashes removed, so `${base}/path` is right for absolute and same-origin bases alike. */
export function normaliseBaseURL(baseURL: string): string {
  return baseURL.replace(/\/+$/, '');
}

export function createHttp(baseURL: string, fetchImpl: FetchLike): Http {
  const base = normaliseBaseURL(baseURL);
  const url = (path: string, query?: Record<string, QueryValue>) => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
    }
    const qs = params.toString();
    return `${base}${path}${qs ? `?${qs}` : ''}`;
  };
  return {
    baseURL: base,
    fetch: fetchImpl,
    url,
    async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
      const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
      // No content-type without a body: the server answers 415/400 to an empty body declared as JSON.
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      let res: Response;
      try {
        res = await fetchImpl(url(path, options.query), {
          method,
          headers,
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
          credentials: 'include',
          signal: options.signal,
        });
      } catch (err) {
        if ((err as Error).name === 'AbortError') throw err;
        throw new HeraldApiError(0, 'NETWORK_ERROR', (err as Error).message || 'Network request failed');
      }
      if (!res.ok) throw await errorFromResponse(res);
      return (await res.json()) as T;
    },
  };
}
