// Owns the TRUST_PROXY trust function for requests that never reach Fastify (the chat upgrade). The value rules
// themselves (parse, validate, normalise origins) live with the configuration that reads them (config.ts).
import proxyaddr from '@fastify/proxy-addr';
import { parseTrustProxy } from '../config.js';

/** The same TRUST_PROXY as a proxy-addr trust function, for requests that never reach Fastify. */
export function trustFunction(value: string | undefined): (address: string, hop: number) => boolean {
  const trust = parseTrustProxy(value);
  if (typeof trust === 'boolean') return () => trust;
  if (typeof trust === 'function') return trust;
  return proxyaddr.compile(trust);
}
