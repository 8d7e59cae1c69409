// A browser's subscription re-owned by another user (CONTRACT §11: "the same endpoint again → 200 with the same id
// (and the new owner when another user signs in on that browser)") must survive the previous owner's own
// activity. subscribe() (push/service.ts) trims the caller's subscriptions beyond PUSH_MAX_SUBSCRIPTIONS_PER_USER
// with `delete … where id in (select id … where user_id = $caller … offset $max)`: the ids are picked from the
// statement's snapshot, and a row re-owned concurrently is still deleted (READ COMMITTED re-checks only
// `id in (…)` on the new row version, not `user_id`), so the new owner's acknowledged subscription disappears.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { generateVapidKeys } from '../../src/config.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { startPushService, type TestPushService } from '../helpers/push-service.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const vapid = generateVapidKeys();
const ROUNDS = 60;

describe('push subscriptions under concurrency', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let push: TestPushService;

  beforeAll(async () => {
    env = await createTestEnv({
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:ops@example.com',
      PUSH_ALLOW_PRIVATE_ENDPOINTS: 'true',
      PUSH_MAX_SUBSCRIPTIONS_PER_USER: '1',
    });
    a = await env.app({ INSTANCE_ID: 'push-race-a' });
    b = await env.app({ INSTANCE_ID: 'push-race-b' });
    push = await startPushService({ vapidPublicKey: vapid.publicKey });
  });
  afterAll(async () => {
    await env?.close();
    await push?.close();
  });

  const subscribe = (app: App, user: TestUser, subscription: unknown) =>
    app.inject({
      method: 'POST',
      url: '/notification/push/subscriptions',
      headers: jsonHeaders(user.cookie),
      payload: subscription as object,
    });
  const idsOf = async (user: TestUser) => {
    const res = await a.inject({
      method: 'GET',
      url: '/notification/push/subscriptions',
      headers: { cookie: user.cookie },
    });
    expect(res.statusCode).toBe(200);
    return (res.json().subscriptions as Array<{ id: string }>).map((s) => s.id);
  };

  it('a browser taken over by another user keeps its subscription while the previous owner subscribes elsewhere', async () => {
    const first = await createVerifiedUser(a, env.smtp, { name: 'First' });
    const second = await createVerifiedUser(a, env.smtp, { name: 'Second' });
    const lost: Array<{ round: number; status: number; id: string; secondHas: string[] }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const shared = push.browser();
      const other = push.browser();
      const own = await subscribe(a, first, shared.subscription);
      expect(own.statusCode, own.body).toBe(201);
      // `first` adds another browser (its trim drops `shared`, its oldest, at the cap of 1) while `second` signs
      // in on `shared` and subscribes it.
      const [, taken] = await Promise.all([
        subscribe(a, first, other.subscription),
        subscribe(b, second, shared.subscription),
      ]);
      expect([200, 201], taken.body).toContain(taken.statusCode);
      const id = taken.json().subscription.id as string;
      const secondHas = await idsOf(second);
      if (!secondHas.includes(id)) lost.push({ round, status: taken.statusCode, id, secondHas });
    }
    expect(lost, `second user's acknowledged subscription gone in ${lost.length}/${ROUNDS} rounds`).toEqual(
      [],
    );
  }, 120_000);
});
