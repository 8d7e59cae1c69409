// The unread count is never stale after a change returns (docs/design/notifications.md "Unread count cache"),
// also for a request whose change another request made first: two clients marking the same notification read at
// once on two instances; the one that waited for the other's row lock changes nothing and returns at once, and
// its next unread-count must already see the notification read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser, requestAs, type TestUser } from '../helpers/users.js';

const ROUNDS = 60;

describe('unread count after racing marks', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let user: TestUser;
  beforeAll(async () => {
    env = await createTestEnv();
    a = await env.app({ INSTANCE_ID: 'race-a' });
    b = await env.app({ INSTANCE_ID: 'race-b' });
    user = await createVerifiedUser(a, env.smtp, { name: 'Racer' });
  });
  afterAll(async () => {
    await env.close();
  });

  it('both racers read the new count right after their PATCH returns', async () => {
    const stale: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const n = await a.notifications.createForUser(user.id, {
        type: 'info',
        title: `r${round}`,
        content: 'c',
      });
      const before = (await requestAs(a, user, 'GET', '/notification/unread-count')).json()
        .unreadCount as number;
      // Both caches hold the count before the change.
      await requestAs(b, user, 'GET', '/notification/unread-count');
      const counts = await Promise.all(
        [a, b].map(async (app) => {
          const res = await requestAs(app, user, 'PATCH', `/notification/${n.id}/read`, { read: true });
          expect(res.statusCode, res.body).toBe(200);
          return (await requestAs(app, user, 'GET', '/notification/unread-count')).json()
            .unreadCount as number;
        }),
      );
      counts.forEach((c, i) => {
        if (c !== before - 1) stale.push(`round ${round} app ${i}: ${c} (expected ${before - 1})`);
      });
    }
    expect(stale).toEqual([]);
  }, 120_000);
});
