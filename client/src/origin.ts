// Whether the service accepts the page's origin. A page opened at an address the service does not trust can read
// but not sign in, and its chat socket is refused before the upgrade (403, which a browser's WebSocket cannot see):
// this check turns that into a message naming the setting instead of "Invalid origin" or an endless reconnect.
import type { FetchLike } from './http.js';

export interface OriginCheck {
  /** The page's origin as the service saw it. */
  value: string;
  /** Whether sign-in, requests with the session and the chat socket are accepted from it. */
  trusted: boolean;
  /** The service setting that lists allowed origins. */
  setting: 'CORS_ALLOWLISTED_ORIGINS';
}

/**
 * The message an app can show for an untrusted origin (it names CORS_ALLOWLISTED_ORIGINS).
 * @example
 * const check = await client.checkOrigin();
 * if (check && !check.trusted) banner.textContent = originRefusedMessage(check);
 */
export function originRefusedMessage(check: OriginCheck): string {
  return (
    `The service does not accept requests from this page's address (${check.value}): add it to ` +
    `${check.setting}, or open the app at the address the service's start log prints.`
  );
}

/**
 * @example
 * const check = await checkOrigin('https://herald.example.com', fetch, { origin: location.origin });
 *
 * GET /client-config and read its `origin`; null when it cannot be told (service unreachable, or too old to say).
 * `inPage`: a cross-origin page whose origin CORS refuses cannot read the answer, so an opaque request that does get
 * one shows the service is up and refusing this origin.
 */
export async function checkOrigin(
  baseURL: string,
  fetchImpl: FetchLike,
  page: { origin: string } | null,
): Promise<OriginCheck | null> {
  const url = `${baseURL}/client-config`;
  try {
    const res = await fetchImpl(url, { credentials: 'include', headers: { accept: 'application/json' } });
    if (!res.ok) return null;
    const body = (await res.json()) as { origin?: OriginCheck };
    return body.origin && typeof body.origin.trusted === 'boolean' ? body.origin : null;
  } catch {
    if (!page) return null;
    try {
      await fetchImpl(url, { mode: 'no-cors', credentials: 'omit' });
      return { value: page.origin, trusted: false, setting: 'CORS_ALLOWLISTED_ORIGINS' };
    } catch {
      return null;
    }
  }
}
