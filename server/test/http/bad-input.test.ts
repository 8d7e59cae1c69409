// Hostile request lines and bodies get the contract's 4xx, never a 500: NUL characters (which PostgreSQL text
// cannot hold) wherever they arrive, and router-level URL errors raised before any route runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { findNul } from '../../src/http/nul-guard.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

describe('NUL characters and malformed URLs', () => {
  let env: TestEnv;
  let app: App;
  let user: TestUser;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
    user = await createVerifiedUser(app, env.smtp);
  });
  afterAll(() => env.close());

  it('finds NUL in nested strings and keys', () => {
    expect(findNul({ a: ['x', { b: 'y\u0000' }] })).toBe('a.1.b');
    expect(findNul({ 'k\u0000': 1 })).toBe('k\u0000');
    expect(findNul('\u0000')).toBe('');
    expect(findNul({ a: ['clean', 1, null, { b: true }] })).toBeNull();
  });

  it('refuses a JSON body with NUL on a feature route and stores nothing', async () => {
    const admin = await createAdmin(app, env.smtp);
    const res = await app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: jsonHeaders(admin.cookie),
      payload: `{"target":{"scope":"user","identifier":"${user.id}"},"notification":{"type":"info","title":"a\\u0000b","content":"c"}}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [{ path: 'body.notification.title', message: 'must not contain NUL characters' }],
    });
    const list = await app.inject({ url: '/notification/list', headers: { cookie: user.cookie } });
    expect(list.json().pagination.totalCount).toBe(0);
  });

  it('refuses NUL on /auth routes', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      headers: jsonHeaders(),
      payload: '{"email":"nul@example.test","password":"long enough pw","name":"a\\u0000b"}',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: 'body.name' }] });
  });

  it('refuses %00 in paths and query strings', async () => {
    const path = await app.inject({
      method: 'DELETE',
      url: '/notification/a%00b',
      headers: { cookie: user.cookie },
    });
    expect(path.statusCode).toBe(400);
    const query = await app.inject({
      url: '/notification/list?search=a%00',
      headers: { cookie: user.cookie },
    });
    expect(query.statusCode).toBe(400);
    expect(query.json()).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: 'url' }] });
  });

  it('still parses ordinary JSON and keeps prototype-poisoning protection', async () => {
    const ok = await app.inject({
      method: 'PATCH',
      url: '/notification/preferences',
      headers: jsonHeaders(user.cookie),
      payload: { emailEnabled: false },
    });
    expect(ok.statusCode).toBe(200);
    const poisoned = await app.inject({
      method: 'PATCH',
      url: '/notification/preferences',
      headers: jsonHeaders(user.cookie),
      payload: '{"__proto__":{"emailEnabled":true}}',
    });
    expect(poisoned.statusCode).toBe(400);
  });

  it('answers an over-long path parameter with 404 NOT_FOUND in the contract shape', async () => {
    const res = await app.inject({
      method: 'DELETE',
      url: `/notification/${'a'.repeat(300)}`,
      headers: { cookie: user.cookie },
    });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ code: 'NOT_FOUND', message: 'Not found' });
  });

  it('answers a malformed percent-encoding with 400 INVALID_REQUEST', async () => {
    const res = await app.inject({
      method: 'DELETE',
      url: '/notification/%E0%A4%A',
      headers: { cookie: user.cookie },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_REQUEST' });
  });
});
