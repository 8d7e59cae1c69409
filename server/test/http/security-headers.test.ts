// The precomputed security headers (http/security-headers.ts) are exactly what @fastify/helmet produces with
// Herald's options, and every response of the real app carries them (JSON routes, errors, /docs).
import helmet from '@fastify/helmet';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { SECURITY_HEADERS } from '../../src/http/security-headers.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

describe('security headers', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
  });
  afterAll(() => env.close());

  it('match @fastify/helmet with contentSecurityPolicy off and CORP same-site', async () => {
    const bare = Fastify();
    await bare.register(helmet, {
      contentSecurityPolicy: false,
      crossOriginResourcePolicy: { policy: 'same-site' },
    });
    bare.get('/x', async () => ({ ok: true }));
    const res = await bare.inject({ method: 'GET', url: '/x' });
    await bare.close();
    const fromHelmet = Object.fromEntries(
      Object.entries(res.headers).filter(
        ([name]) => !['content-type', 'content-length', 'date', 'connection'].includes(name),
      ),
    );
    expect(SECURITY_HEADERS).toEqual(fromHelmet);
  });

  it.each([
    ['GET', '/health', 200],
    ['GET', '/notification/unread-count', 401],
    ['GET', '/no/such/route', 404],
    ['GET', '/docs', 200],
  ] as const)('are on %s %s (%i)', async (method, url, status) => {
    const res = await app.inject({ method, url });
    expect(res.statusCode).toBe(status);
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(res.headers[name], name).toBe(value);
    // JSON runs nothing; the /docs page has its own policy (web/e2e/docs-csp.test.ts renders it in Chromium).
    if (url === '/docs') expect(res.headers['content-security-policy']).toContain("script-src 'self'");
    else expect(res.headers['content-security-policy']).toBeUndefined();
  });
});
