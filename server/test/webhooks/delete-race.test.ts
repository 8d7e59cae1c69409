// An event emitted while a webhook endpoint is being deleted (CONTRACT §9). The event's deliveries are queued in the
// transaction of their cause (here an admin send), so a delivery insert that failed the endpoint's foreign key
// rolled the cause back: the admin got a 500 and the user no notification (seen from outside as 1 failed send in 3
// rounds of deleting an endpoint while sends ran on another instance). The interleaving is forced here: the DELETE
// is held uncommitted by a second connection until the send's statement waits on it, then committed.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { startReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

describe('webhook endpoint deleted while an event is queued for it', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  let receiver: WebhookReceiver;
  let db: pg.Client;
  let watch: pg.Client;

  beforeAll(async () => {
    env = await createTestEnv({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    app = await env.app();
    [admin, user] = await Promise.all([createAdmin(app, env.smtp), createVerifiedUser(app, env.smtp)]);
    receiver = await startReceiver();
    db = new pg.Client({ connectionString: env.db.url });
    watch = new pg.Client({ connectionString: env.db.url });
    await Promise.all([db.connect(), watch.connect()]);
  });
  afterAll(async () => {
    await Promise.all([db?.end(), watch?.end()]);
    await receiver?.close();
    await env?.close();
  });

  it('the event’s cause commits and the deleted endpoint gets nothing', async () => {
    const created = await app.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: jsonHeaders(admin.cookie),
      payload: { url: receiver.url(), events: ['notification.created'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    const hookId = (created.json() as { id: string }).id;

    await db.query('begin');
    await db.query('delete from webhook_endpoint where id = $1', [hookId]);
    const send = app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: jsonHeaders(admin.cookie),
      payload: {
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'announcement', title: 'during delete', content: 'x' },
      },
    });
    // The send's delivery statement waits for the uncommitted DELETE's row lock.
    // (Watched from a second connection: inside a transaction, pg_stat_activity is read once.)
    await expect
      .poll(
        async () =>
          (
            await watch.query(
              `select count(*)::int as n from pg_stat_activity
               where wait_event_type = 'Lock' and query ilike '%insert into webhook_delivery%'`,
            )
          ).rows[0]?.n,
        { timeout: 20_000 },
      )
      .toBe(1);
    await db.query('commit');

    const res = await send;
    expect(res.statusCode, res.body).toBe(200);
    const stored = await db.query(
      'select count(*)::int as n from notification where user_id = $1 and title = $2',
      [user.id, 'during delete'],
    );
    expect(stored.rows[0]?.n).toBe(1);
    const queued = await db.query('select count(*)::int as n from webhook_delivery where endpoint_id = $1', [
      hookId,
    ]);
    expect(queued.rows[0]?.n).toBe(0);
  });
});
