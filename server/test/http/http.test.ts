// HTTP skeleton: contract error bodies for unknown routes, oversized bodies, wrong content types and broken JSON
// (on our routes and through the /auth bridge), CORS allowlist with credentials, security headers, request ids.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { jsonHeaders, uniqueEmail } from '../helpers/users.js';

describe('http skeleton', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv({ BODY_LIMIT_BYTES: '2048' });
    app = await env.app();
  });
  afterAll(() => env.close());

  it('answers unknown routes with 404 NOT_FOUND JSON', async () => {
    for (const [method, url] of [
      ['GET', '/nope'],
      ['POST', '/nope/deeper?x=1'],
      ['DELETE', '/auth/sign-in/email'],
    ] as const) {
      const res = await app.inject({ method, url });
      expect(res.statusCode, url).toBe(404);
      expect(res.headers['content-type']).toMatch(/application\/json/);
      expect(res.json()).toMatchObject({ code: 'NOT_FOUND' });
      expect(res.json().message).not.toContain('?x=1');
    }
  });

  it('answers 413 PAYLOAD_TOO_LARGE above the body limit, also through the /auth bridge', async () => {
    const big = JSON.stringify({ email: uniqueEmail(), password: 'x'.repeat(4096), name: 'n' });
    for (const url of ['/auth/sign-up/email', '/auth/sign-in/email', '/auth/verify-email', '/nope']) {
      const res = await app.inject({ method: 'POST', url, headers: jsonHeaders(), payload: big });
      expect(res.statusCode, url).toBe(413);
      expect(res.json()).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: 'Request body is too large' });
    }
  });

  it('answers 415 UNSUPPORTED_MEDIA_TYPE for non-JSON bodies, also through the /auth bridge', async () => {
    for (const [type, payload] of [
      ['application/xml', '<a/>'],
      ['text/plain', '{"email":"a@b.c","password":"12345678"}'],
      ['application/x-www-form-urlencoded', 'email=a%40b.c&password=12345678'],
      ['multipart/form-data; boundary=x', '--x--'],
    ] as const) {
      const res = await app.inject({
        method: 'POST',
        url: '/auth/sign-in/email',
        headers: { 'content-type': type, origin: TEST_ORIGIN },
        payload,
      });
      expect(res.statusCode, type).toBe(415);
      expect(res.json().code).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
  });

  it('answers 400 INVALID_JSON for broken JSON', async () => {
    for (const payload of ['{"email":', '{bad json}', 'nul']) {
      const res = await app.inject({
        method: 'POST',
        url: '/auth/sign-in/email',
        headers: jsonHeaders(),
        payload,
      });
      expect(res.statusCode, payload).toBe(400);
      expect(res.json().code).toBe('INVALID_JSON');
    }
  });

  it('answers a preflight without Origin or Access-Control-Request-Method with 400 in the error shape', async () => {
    for (const headers of [{}, { origin: TEST_ORIGIN }, { 'access-control-request-method': 'POST' }]) {
      const res = await app.inject({ method: 'OPTIONS', url: '/notification/list', headers });
      expect(res.statusCode, JSON.stringify(headers)).toBe(400);
      expect(res.json()).toMatchObject({ code: 'INVALID_REQUEST', message: expect.any(String) });
    }
  });

  it('allows only allowlisted origins, with credentials', async () => {
    const allowed = await app.inject({
      method: 'OPTIONS',
      url: '/auth/sign-in/email',
      headers: {
        origin: TEST_ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(allowed.statusCode).toBe(204);
    expect(allowed.headers['access-control-allow-origin']).toBe(TEST_ORIGIN);
    expect(allowed.headers['access-control-allow-credentials']).toBe('true');
    const simple = await app.inject({ method: 'GET', url: '/health', headers: { origin: TEST_ORIGIN } });
    expect(simple.headers['access-control-allow-origin']).toBe(TEST_ORIGIN);
    expect(simple.headers.vary).toMatch(/origin/i);

    const evil = await app.inject({
      method: 'OPTIONS',
      url: '/auth/sign-in/email',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    const evilGet = await app.inject({
      method: 'GET',
      url: '/health',
      headers: { origin: 'https://evil.example' },
    });
    expect(evilGet.headers['access-control-allow-origin']).toBeUndefined();
    // better-auth's own origin check refuses cookie-bearing mutations from other origins.
    const evilPost = await app.inject({
      method: 'POST',
      url: '/auth/sign-in/email',
      headers: { 'content-type': 'application/json', origin: 'https://evil.example', cookie: 'a=b' },
      payload: { email: uniqueEmail(), password: 'whatever123' },
    });
    expect(evilPost.statusCode).toBe(403);
  });

  it('sets security headers and a request id on every response', async () => {
    const res = await app.inject({ method: 'GET', url: '/health' });
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-frame-options']).toBe('SAMEORIGIN');
    expect(res.headers['strict-transport-security']).toBeDefined();
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['x-powered-by']).toBeUndefined();
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    // A safe incoming id is kept (correlation with the load balancer's logs); an unsafe one is replaced.
    const kept = await app.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': 'lb-1234' } });
    expect(kept.headers['x-request-id']).toBe('lb-1234');
    const other = await app.inject({
      method: 'GET',
      url: '/nope',
      headers: { 'x-request-id': 'spoofed id' },
    });
    expect(other.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(other.headers['x-request-id']).not.toBe(res.headers['x-request-id']);
  });

  it('serves the OpenAPI document and the reference UI', async () => {
    const doc = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(doc.statusCode).toBe(200);
    expect(doc.json().openapi).toMatch(/^3\./);
    expect(Object.keys(doc.json().paths)).toContain('/health');
    const ui = await app.inject({ method: 'GET', url: '/docs/' });
    expect(ui.statusCode).toBe(200);
  });
});

describe('bad input on /auth routes never yields a 5xx', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
  });
  afterAll(() => env.close());

  const routes = [
    '/auth/sign-up/email',
    '/auth/sign-in/email',
    '/auth/sign-in/username',
    '/auth/sign-in/magic-link',
    '/auth/sign-in/social',
    '/auth/sign-out',
    '/auth/verify-email',
    '/auth/send-verification-email',
    '/auth/forget-password',
    '/auth/request-password-reset',
    '/auth/reset-password',
    '/auth/revoke-session',
    '/auth/admin/ban-user',
    '/auth/admin/set-role',
    '/auth/admin/revoke-user-sessions',
  ];
  const bodies: Array<[string, string | undefined]> = [
    ['no body', undefined],
    ['empty string', ''],
    ['empty object', '{}'],
    ['null', 'null'],
    ['array', '[1,2]'],
    ['number', '42'],
    ['string', '"x"'],
    [
      'wrong types',
      JSON.stringify({
        email: 5,
        password: [1],
        name: {},
        username: true,
        token: 7,
        newPassword: null,
        provider: 1,
      }),
    ],
    [
      'invalid email',
      JSON.stringify({
        email: 'not an email',
        password: 'long enough 1',
        name: 'x',
        username: 'u',
        newPassword: 'abc',
      }),
    ],
    [
      'huge fields',
      JSON.stringify({
        email: `${'a'.repeat(5000)}@x.y`,
        password: 'p'.repeat(20_000),
        name: 'n'.repeat(20_000),
      }),
    ],
    [
      'unicode junk',
      JSON.stringify({ email: '\u0000@\uFFFF', password: '\uD800\uD800\uD800\uD800', name: '\u202E' }),
    ],
    ['prototype keys', '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}'],
  ];

  it.each(routes)('POST %s', async (url) => {
    for (const [label, payload] of bodies) {
      const res = await app.inject({
        method: 'POST',
        url,
        headers: payload === undefined ? { origin: TEST_ORIGIN } : jsonHeaders(),
        ...(payload === undefined ? {} : { payload }),
      });
      expect(res.statusCode, `${url} with ${label}: ${res.body}`).toBeLessThan(500);
      if (url !== '/auth/sign-out')
        expect(res.statusCode, `${url} with ${label}`).toBeGreaterThanOrEqual(400);
    }
  });

  it('GET routes with bad queries', async () => {
    for (const url of [
      '/auth/verify-email',
      '/auth/verify-email?token=',
      '/auth/verify-email?token=%ZZ',
      `/auth/verify-email?token=${'x'.repeat(3000)}`,
      '/auth/magic-link/verify',
      '/auth/magic-link/verify?token=nope',
      '/auth/get-session?disableCookieCache=maybe',
      '/auth/callback/oidc',
      '/auth/callback/unknown?code=x&state=y',
      '/auth/admin/list-users?limit=abc',
      '/auth/reset-password/bad-token',
    ]) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, `${url}: ${res.body}`).toBeLessThan(500);
    }
    const cookie = await app.inject({
      method: 'GET',
      url: '/auth/get-session',
      headers: { cookie: 'better-auth.session_token=%%%; x' },
    });
    expect(cookie.statusCode).toBe(200);
    expect(cookie.json()).toBeNull();
  });
});
