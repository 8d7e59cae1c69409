// A redelivery that lands while the same delivery's attempt is still in flight (CONTRACT §9). The attempt's
// outcome must not overwrite the redelivery: before the worker's writes checked their claim, the in-flight
// attempt's success marked the row delivered again and the redelivery never went out (seen once in CI as a
// lost redeliver). The queue is driven by kicks only (a poll far longer than the test), so the order is forced:
// the receiver holds the first attempt, the row is made due again exactly as the redeliver route does (without
// the route's kick, which would let a second claim win the race and hide it), and then the attempt is answered.
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { redeliver } from '../../src/webhooks/repository.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import {
  bodyOf,
  resetWebhooks,
  startReceiver,
  verifySignature,
  type WebhookReceiver,
} from '../helpers/webhook-receiver.js';

describe('redelivery racing the attempt in flight', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    env = await createTestEnv({
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_QUEUE_POLL_MS: '600000',
      // The second case's held attempt fails by this timeout; the first case answers long before it.
      WEBHOOK_TIMEOUT_MS: '1500',
      // A failed attempt's retry would come long after the test: only the redelivery can send it again.
      WEBHOOK_RETRY_BASE_MS: '600000',
    });
    app = await env.app();
    [admin, user] = await Promise.all([createAdmin(app, env.smtp), createVerifiedUser(app, env.smtp)]);
    receiver = await startReceiver();
  });
  afterAll(async () => {
    receiver?.releaseHung();
    await receiver?.close();
    await env?.close();
  });

  const call = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) =>
    app.inject({ method, url, headers: jsonHeaders(admin.cookie), ...(payload ? { payload } : {}) });

  afterEach(() => resetWebhooks(app, receiver));

  /** A webhook whose first attempt for a new notification is held by the receiver, then redelivered. */
  const holdAndRedeliver = async (title: string) => {
    const created = await call('POST', '/admin/webhooks', {
      url: receiver.url(),
      events: ['notification.created'],
    });
    expect(created.statusCode, created.body).toBe(201);
    const hook = created.json() as { id: string; secret: string };
    receiver.respond = () => 'hang';
    const sent = await call('POST', '/admin/notifications/send', {
      target: { scope: 'user', identifier: user.id },
      notification: { type: 'announcement', title, content: 'x' },
    });
    expect(sent.statusCode, sent.body).toBe(200);
    await receiver.until((all) => all.length === 1);
    const first = receiver.received[0];
    if (!first) throw new Error('no first attempt');
    expect(bodyOf(first).data).toMatchObject({ title });
    expect(await redeliver(app.ctx.database.db, hook.id, first.id)).toBe(true);
    return { hook, first };
  };

  it('is sent again after the earlier attempt fails (its retry does not replace the redelivery)', async () => {
    const { first } = await holdAndRedeliver('raced failure');
    // The held attempt times out and fails; the receiver answers the redelivery.
    receiver.respond = () => 200;
    await receiver.until((all) => all.some((r) => r.id === first.id && r.answered === 200));
    expect(receiver.received.filter((r) => r.id === first.id)).toHaveLength(2);
  });

  it('is sent again after the earlier attempt succeeds, with the same webhook-id and a fresh attempt count', async () => {
    const { hook, first } = await holdAndRedeliver('raced success');
    receiver.releaseHung();

    await receiver.until((all) => all.filter((r) => r.id === first.id).length === 2);
    const second = receiver.received[1];
    expect(second?.body).toBe(first.body);
    expect(second && verifySignature(hook.secret, second)).toBe(true);
    // The log shows the redelivery's own outcome: delivered on its first attempt.
    await expect
      .poll(async () => {
        const res = await call('GET', `/admin/webhooks/${hook.id}/deliveries`);
        return (res.json() as { deliveries: Array<{ id: string; status: string; attempt: number }> })
          .deliveries;
      })
      .toEqual([expect.objectContaining({ id: first.id, status: 'delivered', attempt: 1 })]);
    const rows = await app.ctx.database.db.execute(
      sql`select count(*)::int as n from webhook_delivery where event_id = ${first.id}`,
    );
    expect(rowsOf(rows)).toEqual([{ n: 1 }]);
  });
});
