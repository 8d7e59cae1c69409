// Router-level URL errors (before any route runs) still answer in the contract's error body.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser, type TestUser } from '../helpers/users.js';

describe('malformed URLs', () => {
  let env: TestEnv;
  let app: App;
  let user: TestUser;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
    user = await createVerifiedUser(app, env.smtp);
  });
  afterAll(() => env.close());

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
