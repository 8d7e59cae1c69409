// Rate limits on the sensitive auth endpoints live in the store: shared by every instance, keyed by the socket
// address unless TRUST_PROXY says otherwise, and answered with 429 + Retry-After.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { jsonHeaders, uniqueEmail } from '../helpers/users.js';

const MAX = 3;

describe('auth rate limits', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  beforeAll(async () => {
    env = await createTestEnv({ AUTH_RATE_LIMIT_MAX: String(MAX), AUTH_RATE_LIMIT_WINDOW_S: '60' });
    [a, b] = await Promise.all([env.app(), env.app()]);
  });
  afterAll(() => env.close());

  const hit = (
    app: App,
    url: string,
    payload: object,
    remoteAddress: string,
    headers: Record<string, string> = {},
  ) => app.inject({ method: 'POST', url, headers: { ...jsonHeaders(), ...headers }, payload, remoteAddress });

  const cases: Array<[string, () => object]> = [
    ['/auth/sign-in/email', () => ({ email: uniqueEmail(), password: 'wrong password' })],
    ['/auth/sign-up/email', () => ({ email: uniqueEmail(), password: 'long enough pw', name: 'N' })],
    ['/auth/sign-in/magic-link', () => ({ email: uniqueEmail() })],
    ['/auth/forget-password', () => ({ email: uniqueEmail() })],
    ['/auth/request-password-reset', () => ({ email: uniqueEmail() })],
    ['/auth/sign-in/username', () => ({ username: 'nobody_here', password: 'wrong password' })],
  ];

  cases.forEach(([url, body], i) => {
    it(`limits ${url} across two instances with Retry-After`, async () => {
      const ip = `10.1.${i}.7`;
      for (let n = 0; n < MAX; n++) {
        const res = await hit(n % 2 === 0 ? a : b, url, body(), ip);
        expect(res.statusCode, res.body).not.toBe(429);
      }
      const limited = await hit(b, url, body(), ip);
      expect(limited.statusCode).toBe(429);
      const retryAfter = Number(limited.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect((await hit(a, url, body(), ip)).statusCode).toBe(429);
      // Another client address is not affected.
      expect((await hit(a, url, body(), `10.2.${i}.7`)).statusCode).not.toBe(429);
    });
  });

  it('does not limit session lookups (polled by front ends, cookie-authenticated)', async () => {
    // Beyond better-auth's general per-IP rule (300 per minute) for every other /auth route.
    const statuses = new Set<number>();
    for (let n = 0; n < 320; n++) {
      const res = await a.inject({ method: 'GET', url: '/auth/get-session', remoteAddress: '10.7.7.7' });
      statuses.add(res.statusCode);
    }
    expect([...statuses]).toEqual([200]);
  });

  it('ignores a forged X-Forwarded-For without TRUST_PROXY', async () => {
    const ip = '10.9.9.9';
    for (let n = 0; n < MAX; n++) {
      await hit(a, '/auth/sign-in/email', { email: uniqueEmail(), password: 'wrong password' }, ip, {
        'x-forwarded-for': `203.0.113.${n}`,
        'x-herald-client-ip': `198.51.100.${n}`,
      });
    }
    const res = await hit(b, '/auth/sign-in/email', { email: uniqueEmail(), password: 'x'.repeat(9) }, ip, {
      'x-forwarded-for': '203.0.113.200',
    });
    expect(res.statusCode).toBe(429);
  });

  it('uses X-Forwarded-For when TRUST_PROXY is set', async () => {
    const proxied = await env.app({ TRUST_PROXY: 'true' });
    const proxy = '10.8.8.8';
    for (let n = 0; n < MAX; n++) {
      await hit(proxied, '/auth/sign-in/email', { email: uniqueEmail(), password: 'wrong password' }, proxy, {
        'x-forwarded-for': '203.0.113.50',
      });
    }
    const same = await hit(
      proxied,
      '/auth/sign-in/email',
      { email: uniqueEmail(), password: 'wrong pw 1' },
      proxy,
      {
        'x-forwarded-for': '203.0.113.50',
      },
    );
    expect(same.statusCode).toBe(429);
    const other = await hit(
      proxied,
      '/auth/sign-in/email',
      { email: uniqueEmail(), password: 'wrong pw 2' },
      proxy,
      {
        'x-forwarded-for': '203.0.113.51',
      },
    );
    expect(other.statusCode).toBe(401);
  });
});
