// Per-endpoint fairness: an endpoint that never answers (until the timeout) holds only its own send slots,
// so another endpoint subscribed to the same events receives all of them meanwhile. Asserted by ordering —
// everything reached the fast endpoint while the slow one has answered nothing — never by wall-clock time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { bodyOf, startReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const EVENTS = 12;

describe('webhook fairness across endpoints', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  let slow: WebhookReceiver;
  let fast: WebhookReceiver;

  beforeAll(async () => {
    env = await createTestEnv({
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_QUEUE_POLL_MS: '50',
      // Far longer than the test: the slow endpoint's sends stay in flight until it is released.
      WEBHOOK_TIMEOUT_MS: '120000',
      WEBHOOK_CONCURRENCY_PER_ENDPOINT: '2',
      WEBHOOK_CONCURRENCY: '8',
    });
    app = await env.app();
    [admin, user] = await Promise.all([createAdmin(app, env.smtp), createVerifiedUser(app, env.smtp)]);
    [slow, fast] = await Promise.all([startReceiver(), startReceiver()]);
  });
  afterAll(async () => {
    slow?.releaseHung();
    await Promise.allSettled([slow?.close(), fast?.close()]);
    await env?.close();
  });

  it('a slow endpoint does not delay deliveries to another endpoint', async () => {
    slow.respond = () => 'hang';
    for (const rx of [slow, fast]) {
      const res = await app.inject({
        method: 'POST',
        url: '/admin/webhooks',
        headers: jsonHeaders(admin.cookie),
        payload: { url: rx.url(), events: ['notification.created'] },
      });
      expect(res.statusCode).toBe(201);
    }
    for (let i = 0; i < EVENTS; i++) {
      const res = await app.inject({
        method: 'POST',
        url: '/admin/notifications/send',
        headers: jsonHeaders(admin.cookie),
        payload: {
          target: { scope: 'user', identifier: user.id },
          notification: { type: 'announcement', title: `fair ${i}`, content: 'x' },
        },
      });
      expect(res.statusCode).toBe(200);
    }
    await fast.until((all) => all.length >= EVENTS);
    // Every event reached the fast endpoint while the slow one still holds its first requests unanswered,
    // and no more of them than its send slots.
    expect(new Set(fast.received.map((r) => bodyOf(r).data.title)).size).toBe(EVENTS);
    expect(slow.received.every((r) => r.answered === null)).toBe(true);
    expect(slow.received.length).toBeLessThanOrEqual(2);

    // Released, the slow endpoint gets everything too.
    slow.releaseHung();
    await slow.until((all) => new Set(all.filter((r) => r.answered === 200).map((r) => r.id)).size >= EVENTS);
  });
});
