import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { dbUnread, seed } from '../helpers/seed.js';
import { createVerifiedUser } from '../helpers/users.js';

const DAY = 24 * 60 * 60 * 1000;

describe('notification retention', () => {
  let env: TestEnv;
  let app: App;

  beforeAll(async () => {
    env = await createTestEnv({ RETENTION_MAX_PER_USER: '5', RETENTION_MAX_AGE_DAYS: '90' });
    app = await env.app();
  });
  afterAll(() => env.close());

  const idsOf = async (userId: string) =>
    rowsOf<{ id: string }>(
      await app.ctx.database.db.execute(
        sql`select id from notification where user_id = ${userId} order by id`,
      ),
    ).map((r) => r.id);

  it('deletes exactly the rows older than the age limit and beyond the newest N per user', async () => {
    const [a, b, c] = await Promise.all([
      createVerifiedUser(app, env.smtp),
      createVerifiedUser(app, env.smtp),
      createVerifiedUser(app, env.smtp),
    ]);
    const now = Date.now();
    const aOld = await seed(app, a.id, [
      { createdAt: new Date(now - 91 * DAY) },
      { createdAt: new Date(now - 200 * DAY) },
      { createdAt: new Date(now - 365 * DAY), read: true },
    ]);
    const aKeep = await seed(app, a.id, [
      { createdAt: new Date(now - 89 * DAY) },
      { createdAt: new Date(now - 1 * DAY) },
      { createdAt: new Date(now - 1000) },
    ]);
    // b: 8 recent rows, two sharing a timestamp at the cut, so ties are broken by id like the list order
    const tie = new Date(now - 5 * DAY);
    const bRows = await seed(app, b.id, [
      { createdAt: new Date(now - 1 * DAY) },
      { createdAt: new Date(now - 2 * DAY) },
      { createdAt: new Date(now - 3 * DAY) },
      { createdAt: new Date(now - 4 * DAY) },
      { createdAt: tie },
      { createdAt: tie },
      { createdAt: new Date(now - 6 * DAY) },
      { createdAt: new Date(now - 7 * DAY) },
    ]);
    const [tieHigh, tieLow] = [bRows[4], bRows[5]].sort().reverse() as [string, string];
    const cRows = await seed(
      app,
      c.id,
      Array.from({ length: 5 }, (_, i) => ({ createdAt: new Date(now - i * DAY) })),
    );

    // cache a's unread count before the run
    const before = await app.inject({
      method: 'GET',
      url: '/notification/unread-count',
      headers: { cookie: a.cookie },
    });
    expect(before.json().unreadCount).toBe(5);

    const result = await app.ctx.housekeeping.runOnce();
    expect(result).toMatchObject({ ran: true, expiredDeleted: 3, overflowDeleted: 3 });
    expect(await idsOf(a.id)).toEqual([...aKeep].sort());
    expect(aOld.every((id) => id)).toBe(true);
    const bExpected = [bRows[0], bRows[1], bRows[2], bRows[3], tieHigh].map(String).sort();
    expect(await idsOf(b.id)).toEqual(bExpected);
    expect(await idsOf(b.id)).not.toContain(tieLow);
    expect(await idsOf(c.id)).toEqual([...cRows].sort());

    // cached unread counts were invalidated
    const after = await app.inject({
      method: 'GET',
      url: '/notification/unread-count',
      headers: { cookie: a.cookie },
    });
    expect(after.json().unreadCount).toBe(await dbUnread(app, a.id));
    expect(after.json().unreadCount).toBe(3);

    // a second run finds nothing more
    expect(await app.ctx.housekeeping.runOnce()).toMatchObject({
      ran: true,
      expiredDeleted: 0,
      overflowDeleted: 0,
    });
  });

  it('prunes finished webhook deliveries after 7 days, never pending ones', async () => {
    const db = app.ctx.database.db;
    await db.execute(sql`
      insert into webhook_endpoint (url, events, secret) values ('http://example.test/', '{user.created}', 'x')`);
    await db.execute(sql`
      insert into webhook_delivery (endpoint_id, event_id, type, body, status, created_at, next_attempt_at)
      select (select id from webhook_endpoint limit 1), 'msg_' || s || a, 'user.created', '{}', s,
             now() - make_interval(days => a), now() + interval '1 day'
      from unnest(array['delivered', 'failed', 'pending']) s, unnest(array[1, 8]) a`);
    // Due tomorrow: this app's webhook worker must not attempt the pending ones meanwhile (a CI flake).
    const result = await app.ctx.housekeeping.runOnce();
    expect(result.webhookDeliveriesDeleted).toBe(2);
    const left = rowsOf<{ event_id: string }>(
      await db.execute(sql`select event_id from webhook_delivery order by event_id`),
    ).map((r) => r.event_id);
    expect(left).toEqual(['msg_delivered1', 'msg_failed1', 'msg_pending1', 'msg_pending8']);
  });

  it('every table owner takes part in the one run: finished sends, digests and push deliveries go after 7 days', async () => {
    const db = app.ctx.database.db;
    const u = await createVerifiedUser(app, env.smtp);
    await db.execute(sql`
      insert into broadcast_send (scope, request_hash, body, status, created_at, finished_at)
      select 'user:x', 'h', '{}', s, now() - make_interval(days => a), now() - make_interval(days => a)
      from unnest(array['done', 'failed', 'running']) s, unnest(array[1, 8]) a`);
    await db.execute(sql`
      insert into email_digest (user_id, window_start, window_end, status, next_attempt_at, created_at, finished_at)
      select ${u.id}, now() - make_interval(days => a, secs => i), now(), s, now() + interval '1 day',
             now() - make_interval(days => a), now() - make_interval(days => a)
      from unnest(array['sent', 'empty', 'pending']) with ordinality as t(s, i), unnest(array[1, 8]) a`);
    // The pending digests (and push deliveries below) are due tomorrow: this app's workers must not take them
    // meanwhile (due now, the digest worker did: a composed digest with nothing to say is 'empty').
    await db.execute(sql`
      insert into push_delivery (notification_id, subscription_id, user_id, push_service, status, created_at,
                                 next_attempt_at)
      select gen_random_uuid(), gen_random_uuid(), ${u.id}, 'https://push.example', s, now() - make_interval(days => a),
             now() + interval '1 day'
      from unnest(array['sent', 'gone', 'pending']) s, unnest(array[1, 8]) a`);
    const result = await app.ctx.housekeeping.runOnce();
    expect(result).toMatchObject({
      ran: true,
      broadcastSendsDeleted: 2,
      digestsDeleted: 2,
      pushDeliveriesDeleted: 2,
      emailsDeleted: expect.any(Number),
      idempotencyKeysDeleted: expect.any(Number),
      webhookDeliveriesDeleted: expect.any(Number),
      eventsDeleted: expect.any(Number),
    });
    const statuses = async (table: 'broadcast_send' | 'email_digest' | 'push_delivery') =>
      rowsOf<{ status: string }>(
        await db.execute(sql`select status from ${sql.raw(table)} order by status`),
      ).map((r) => r.status);
    // Recent finished rows and every unfinished one stay.
    expect(await statuses('broadcast_send')).toEqual(['done', 'failed', 'running', 'running']);
    expect(await statuses('email_digest')).toEqual(['empty', 'pending', 'pending', 'sent']);
    expect(await statuses('push_delivery')).toEqual(['gone', 'pending', 'pending', 'sent']);
  });

  it('runs on one instance at a time (advisory lock)', async () => {
    const client = new pg.Client({ connectionString: env.db.url });
    await client.connect();
    try {
      await client.query('select pg_advisory_lock(727001043)');
      expect((await app.ctx.housekeeping.runOnce()).ran).toBe(false);
      await client.query('select pg_advisory_unlock(727001043)');
      expect((await app.ctx.housekeeping.runOnce()).ran).toBe(true);
    } finally {
      await client.end();
    }
  });
});
