import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser } from '../helpers/users.js';

describe('foundation smoke', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
  });
  afterAll(() => env.close());

  it('signs up, verifies and reads the session', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const res = await app.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: u.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json().user.email).toBe(u.email);
    const ctx = await app.ctx.sessions.fromHeaders({ cookie: u.cookie });
    expect(ctx?.user.id).toBe(u.id);
    expect(ctx?.user.emailVerified).toBe(true);
  });
});
