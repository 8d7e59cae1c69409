// Owns the security headers on every response: exactly what @fastify/helmet's defaults produce with Herald's options
// (no Content-Security-Policy: the API serves JSON, and the /docs reference UI needs inline styles and scripts;
// Cross-Origin-Resource-Policy same-site), precomputed once. helmet rebuilt and set them header by header through
// its middleware chain on every request, a measurable share of the cheapest routes (docs/performance.md).
// test/http/security-headers.test.ts checks this table against @fastify/helmet itself.
import type { FastifyInstance } from 'fastify';

export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-site',
  'origin-agent-cluster': '?1',
  'referrer-policy': 'no-referrer',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-dns-prefetch-control': 'off',
  'x-download-options': 'noopen',
  'x-frame-options': 'SAMEORIGIN',
  'x-permitted-cross-domain-policies': 'none',
  'x-xss-protection': '0',
});

export function installSecurityHeaders(app: FastifyInstance): void {
  // A callback hook: no promise and microtask per request for a synchronous step.
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(SECURITY_HEADERS);
    done();
  });
}
