// Owns the security headers on every response: exactly what @fastify/helmet's defaults produce with Herald's options
// (no Content-Security-Policy on JSON: a JSON response runs nothing; Cross-Origin-Resource-Policy same-site),
// precomputed once, and the Content-Security-Policy of the /docs reference UI (DOCS_CSP). helmet rebuilt and set them header by header through
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

/**
 * The /docs page (swagger-ui) loads only its own files: its index page has no inline script (the initializer is
 * a separate file), the spec is fetched from /docs/json, and the logo is a data: URL. So scripts come only from
 * 'self': a script injected through the spec (a description, an example) cannot run, and nothing is sent to a
 * third party (swagger's online validator badge is not allowed either).
 * web/e2e/docs-csp.test.ts loads the page in Chromium and checks it renders with no violation.
 */
export function docsContentSecurityPolicy(https: boolean): string {
  return [
    "default-src 'self'",
    "base-uri 'self'",
    "connect-src 'self'",
    "font-src 'self' data:",
    "form-action 'self'",
    "frame-ancestors 'self'",
    "img-src 'self' data:",
    "object-src 'none'",
    "script-src 'self'",
    "script-src-attr 'none'",
    // swagger-ui inserts a <style> element at run time (its syntax highlighter); inline styles cannot run code.
    "style-src 'self' 'unsafe-inline'",
    ...(https ? ['upgrade-insecure-requests'] : []),
  ].join('; ');
}
