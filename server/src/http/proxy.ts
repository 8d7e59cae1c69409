// Owns the TRUST_PROXY and Origin rules shared by Fastify, the request guards and the chat upgrade (which never
// reaches Fastify).
import proxyaddr from '@fastify/proxy-addr';

export type TrustProxy = boolean | string[] | ((address: string, hop: number) => boolean);

/** TRUST_PROXY: unset/false (socket address), true, a hop count, or a comma-separated list of proxy addresses/CIDRs. */
export function parseTrustProxy(value: string | undefined): TrustProxy {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    return (_address, hop) => hop < hops;
  }
  return value.split(',').map((v) => v.trim());
}

/** The same TRUST_PROXY as a proxy-addr trust function, for requests that never reach Fastify. */
export function trustFunction(value: string | undefined): (address: string, hop: number) => boolean {
  const trust = parseTrustProxy(value);
  if (typeof trust === 'boolean') return () => trust;
  if (typeof trust === 'function') return trust;
  return proxyaddr.compile(trust);
}

/** True when TRUST_PROXY is in one of the forms parseTrustProxy accepts (checked by config). */
export function isTrustProxy(value: string): boolean {
  if (['true', 'false'].includes(value) || /^\d+$/.test(value)) return true;
  return value
    .split(',')
    .map((v) => v.trim())
    .every((v) => /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(v) && (v.includes('.') || v.includes(':')));
}

/**
 * Browsers send `Origin` as scheme://host[:port], host lowercased, default port dropped; allowlist entries are
 * reduced to that form so a trailing slash or capitals cannot silently break CORS (or differ from the WebSocket
 * check). Anything that is not a bare http(s) origin is undefined (a configuration error).
 */
export function normalizeOrigin(entry: string): string | undefined {
  try {
    const u = new URL(entry);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    if (u.username || u.password || u.pathname !== '/' || u.search || u.hash) return undefined;
    return u.origin;
  } catch {
    return undefined;
  }
}
