// A ban takes effect on every session of the user before the request returns (CONTRACT §1), including sessions
// created by sign-ins that ran at the same time as each other (two devices, a retried request). better-auth keeps
// the user's session list in the store (`active-sessions-<userId>`) by read-modify-write in createSession, so
// concurrent sign-ins overwrite each other's entry; a ban (and a password reset) deletes and refreshes only the
// store records on that list, and Herald's guard (auth/guard.ts) trusts a store record it finds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, signIn, type TestUser } from '../helpers/users.js';

const SIGN_INS = 20;

describe('ban after concurrent sign-ins', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let admin: TestUser;

  beforeAll(async () => {
    env = await createTestEnv();
    a = await env.app({ INSTANCE_ID: 'ban-race-a' });
    b = await env.app({ INSTANCE_ID: 'ban-race-b' });
    admin = await createAdmin(a, env.smtp);
  });
  afterAll(async () => {
    await env?.close();
  });

  it('every session of a banned user stops working, however its sign-ins interleaved', async () => {
    const user = await createVerifiedUser(a, env.smtp, { name: 'Victim' });
    const cookies = await Promise.all(
      Array.from({ length: SIGN_INS }, (_, i) => signIn(i % 2 ? a : b, user.email, user.password)),
    );
    // What better-auth's session list in the store holds (every sign-in should have added its session).
    const listed = JSON.parse(
      (await a.ctx.store.get(`auth:active-sessions-${user.id}`)) ?? '[]',
    ) as unknown[];
    for (const cookie of cookies) {
      const res = await a.inject({
        method: 'GET',
        url: '/notification/unread-count',
        headers: { origin: TEST_ORIGIN, cookie },
      });
      expect(res.statusCode).toBe(200);
    }
    const ban = await a.inject({
      method: 'POST',
      url: '/auth/admin/ban-user',
      headers: jsonHeaders(admin.cookie),
      payload: { userId: user.id },
    });
    expect(ban.statusCode, ban.body).toBe(200);
    const alive: Array<{ session: number; app: string; status: number }> = [];
    for (const [i, cookie] of cookies.entries()) {
      for (const [name, app] of [
        ['a', a],
        ['b', b],
      ] as const) {
        const res = await app.inject({
          method: 'GET',
          url: '/notification/unread-count',
          headers: { origin: TEST_ORIGIN, cookie },
        });
        if (res.statusCode !== 401) alive.push({ session: i, app: name, status: res.statusCode });
      }
    }
    expect(
      alive,
      `${new Set(alive.map((x) => x.session)).size}/${SIGN_INS} sessions survived the ban ` +
        `(the store's session list held ${listed.length} of ${SIGN_INS} before it)`,
    ).toEqual([]);
  }, 60_000);
});
