// A ban stops chat's notifications and Web Push (CONTRACT §1: a ban takes effect on every instance before the
// request returns; §6.1: a banned member stops receiving the room). Email already skipped banned users; chat
// notified them and push sent: a direct message or an @mention sent after the ban returned still reached the
// banned user's browser, with the message text (seen from outside in every round). Two instances on one database
// and store; the ban is made on one, the message sent on the other. A message queued before the ban and retried
// after it is cancelled, not sent.
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { generateVapidKeys } from '../../src/config.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { startPushService, type TestPushService } from '../helpers/push-service.js';
import { createAdmin, createVerifiedUser, requestAs, type TestUser } from '../helpers/users.js';
import { type ChatClient, chatUrl, openChat } from '../helpers/ws-client.js';

const vapid = generateVapidKeys();

describe('push to a banned user', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let admin: TestUser;
  let push: TestPushService;
  const sockets: ChatClient[] = [];

  beforeAll(async () => {
    env = await createTestEnv({
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:ops@example.com',
      PUSH_ALLOW_PRIVATE_ENDPOINTS: 'true',
      PUSH_QUEUE_POLL_MS: '50',
      PUSH_RETRY_BASE_MS: '20',
    });
    a = await env.app({ INSTANCE_ID: 'ban-a' });
    b = await env.app({ INSTANCE_ID: 'ban-b' });
    await Promise.all([a.listen({ port: 0, host: '127.0.0.1' }), b.listen({ port: 0, host: '127.0.0.1' })]);
    admin = await createAdmin(a, env.smtp);
    push = await startPushService({ vapidPublicKey: vapid.publicKey });
  });
  afterAll(async () => {
    await Promise.allSettled(sockets.map((s) => s.close()));
    await env?.close();
    await push?.close();
  });

  const db = () => a.ctx.database.db;
  /** A verified user with push on and one subscribed browser. */
  const subscribedUser = async (extra: { name?: string; username?: string } = {}) => {
    const user = await createVerifiedUser(a, env.smtp, extra);
    const prefs = await requestAs(a, user, 'PATCH', '/notification/preferences', { pushEnabled: true });
    expect(prefs.statusCode, prefs.body).toBe(200);
    const browser = push.browser();
    const sub = await requestAs(a, user, 'POST', '/notification/push/subscriptions', browser.subscription);
    expect(sub.statusCode, sub.body).toBe(201);
    return { user, browser };
  };
  const ban = async (user: TestUser) => {
    const res = await requestAs(a, admin, 'POST', '/auth/admin/ban-user', { userId: user.id });
    expect(res.statusCode, res.body).toBe(200);
  };
  /** The user's notifications, once `count` exist (chat creates them after the message is stored). */
  const notificationsOf = async (user: TestUser, count: number) => {
    let ids: string[] = [];
    await expect
      .poll(
        async () => {
          ids = rowsOf<{ id: string }>(
            await db().execute(sql`select id::text as id from notification where user_id = ${user.id}`),
          ).map((r) => r.id);
          return ids.length;
        },
        { timeout: 20_000 },
      )
      .toBe(count);
    return ids;
  };
  const pushRows = async (notificationIds: string[]) =>
    rowsOf<{ status: string; error: string | null }>(
      await db().execute(sql`
        select status, last_error as error from push_delivery
        where notification_id = any(${`{${notificationIds.join(',')}}`}::uuid[])`),
    );
  /** Sends a chat message on instance b and waits until the sender sees it stored. */
  const say = async (socket: ChatClient, roomId: string, message: string) => {
    const clientMessageId = randomUUID();
    socket.send({ type: 'send_message', roomId, message, clientMessageId });
    await socket.next('new_message', (e) => e.message?.clientMessageId === clientMessageId);
  };

  it('a direct message and an @mention sent after the ban returned notify the banned user of nothing', async () => {
    const carolName = `carol_${randomUUID().slice(0, 6)}`;
    const [alice, bob, carol] = await Promise.all([
      createVerifiedUser(a, env.smtp, { name: 'Alice' }),
      createVerifiedUser(a, env.smtp, { name: 'Bob' }),
      createVerifiedUser(a, env.smtp, { name: 'Carol', username: carolName }),
    ]);
    const [socket, bobSocket] = (await Promise.all(
      [alice, bob].map((u) => openChat(`${chatUrl(b)}?rooms=1`, { cookie: u.cookie })),
    )) as [ChatClient, ChatClient];
    sockets.push(socket, bobSocket);
    const username = `banned_${randomUUID().slice(0, 6)}`;
    const { user: victim } = await subscribedUser({ name: 'Victim', username });
    const dm = await requestAs(b, alice, 'POST', '/chat/direct', { userId: victim.id });
    expect(dm.statusCode, dm.body).toBeLessThan(300);
    const bobDm = await requestAs(b, bob, 'POST', '/chat/direct', { userId: victim.id });
    expect(bobDm.statusCode, bobDm.body).toBeLessThan(300);
    const room = await requestAs(b, alice, 'POST', '/chat/rooms', {
      name: 'with victim',
      kind: 'private',
      memberIds: [victim.id, carol.id],
    });
    expect(room.statusCode, room.body).toBe(201);
    const roomId = room.json().room.id as string;

    // Control: before the ban, Alice's direct message notifies and is queued for the browser.
    await say(socket, dm.json().room.id as string, 'before the ban');
    const [before] = await notificationsOf(victim, 1);
    await expect.poll(() => pushRows([before as string]), { timeout: 20_000 }).toHaveLength(1);

    await ban(victim);
    // (A conversation's messages share one notification: Bob's would be a new one.)
    await say(bobSocket, bobDm.json().room.id as string, 'secret after the ban');
    socket.send({ type: 'subscribe', roomId });
    await socket.next('subscribed', (e) => e.roomId === roomId);
    // Carol, mentioned in the same message and offline, shows when the mentions have been looked up.
    await say(socket, roomId, `hey @${username} and @${carolName}, secret after the ban`);
    await notificationsOf(carol, 1);
    expect(await notificationsOf(victim, 1)).toEqual([before]);
    const pushed = rowsOf<{ n: number }>(
      await db().execute(sql`select count(*)::int as n from push_delivery where user_id = ${victim.id}`),
    );
    expect(pushed[0]?.n).toBe(1);
  });

  it('a message queued before the ban and retried after it is cancelled, not sent', async () => {
    const { user, browser } = await subscribedUser();
    // The first attempt is refused with a Retry-After longer than the ban takes.
    push.program(browser.token, [{ status: 503, headers: { 'retry-after': '2' } }]);
    const send = await requestAs(b, admin, 'POST', '/admin/notifications/send', {
      target: { scope: 'user', identifier: user.id },
      notification: {
        type: 'mention',
        title: 'queued before the ban',
        content: 'x',
        deliveryOptions: { strategies: ['push'] },
      },
    });
    expect(send.statusCode, send.body).toBe(200);
    await push.until(() => push.requests.some((m) => m.token === browser.token));
    await ban(user);
    const [id] = await notificationsOf(user, 1);
    await expect
      .poll(async () => pushRows([id as string]), { timeout: 20_000 })
      .toEqual([{ status: 'cancelled', error: 'user banned' }]);
    expect(push.requests.filter((m) => m.token === browser.token)).toHaveLength(1);
    expect(push.accepted.filter((m) => m.token === browser.token)).toEqual([]);
  });
});
