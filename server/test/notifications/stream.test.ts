import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { NOTIFICATION_EVENTS_TOPIC } from '../../src/notifications/events.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const note = (title: string) => ({ type: 'mention' as const, title, content: `${title} content` });

describe('notification SSE stream', () => {
  let env: TestEnv;
  let app: App;
  let url: string;
  let admin: TestUser;
  const clients: SseClient[] = [];
  const open = async (u: TestUser | undefined, lastEventId?: string, base = url) => {
    const c = await openStream(base, u?.cookie, { lastEventId });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    env = await createTestEnv({ SSE_KEEPALIVE_MS: '150' });
    app = await env.app();
    url = await app.listen({ port: 0, host: '127.0.0.1' });
    admin = await createAdmin(app, env.smtp);
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await env.close();
  });

  it('answers 401 JSON before any stream without a valid session', async () => {
    const c = await open(undefined);
    expect(c.status).toBe(401);
    expect(c.headers['content-type']).toContain('application/json');
    await c.ended;
    expect(JSON.parse(c.raw())).toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('sends connected first, then every event type, each with an id', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const existing = await app.notifications.createForUser(u.id, note('before'));
    const c = await open(u);
    expect(c.status).toBe(200);
    expect(c.headers['content-type']).toContain('text/event-stream');
    expect(c.headers['cache-control']).toContain('no-cache');
    expect(c.headers['x-accel-buffering']).toBe('no');
    // The stream writes its own head: it still carries the request id and the security headers every response has.
    expect(c.headers['x-request-id']).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(c.headers['x-content-type-options']).toBe('nosniff');
    const connected = await c.waitFor(() => true);
    expect(connected.event).toBe('connected');
    expect(connected.data).toMatchObject({ type: 'connected', userId: u.id, unreadCount: 1 });
    expect(typeof connected.data.timestamp).toBe('number');

    const created = await app.notifications.createForUser(u.id, note('hello\r\nevent: injected'));
    const nn = await c.waitFor((e) => e.event === 'new_notification');
    expect(nn.data).toMatchObject({
      type: 'new_notification',
      notification: { id: created.id, title: 'hello\r\nevent: injected' },
    });
    expect(c.events.some((e) => e.event === 'injected')).toBe(false);
    const uc1 = await c.waitFor((e) => e.event === 'unread_count_changed');
    expect(uc1.data).toEqual({ type: 'unread_count_changed', unreadCount: 2 });

    const mark = c.events.length;
    await app.inject({
      method: 'PATCH',
      url: `/notification/${existing.id}/read`,
      headers: jsonHeaders(u.cookie),
      payload: { read: true },
    });
    const upd = await c.waitFor((e) => e.event === 'notification_updated', 5000, mark);
    expect(upd.data).toMatchObject({ notification: { id: existing.id, read: true } });
    expect((await c.waitFor((e) => e.event === 'unread_count_changed', 5000, mark)).data.unreadCount).toBe(1);

    const mark2 = c.events.length;
    await app.inject({ method: 'DELETE', url: `/notification/${created.id}`, headers: { cookie: u.cookie } });
    expect((await c.waitFor((e) => e.event === 'notification_deleted', 5000, mark2)).data).toEqual({
      type: 'notification_deleted',
      notificationId: created.id,
    });
    expect((await c.waitFor((e) => e.event === 'unread_count_changed', 5000, mark2)).data.unreadCount).toBe(
      0,
    );

    await app.notifications.createForUser(u.id, note('third'));
    const mark3 = c.events.length;
    await app.inject({ method: 'DELETE', url: '/notification/delete-all', headers: { cookie: u.cookie } });
    expect((await c.waitFor((e) => e.event === 'notifications_cleared', 5000, mark3)).data).toEqual({
      type: 'notifications_cleared',
      deletedCount: 2,
    });

    const ka = await c.waitFor((e) => e.event === 'keep_alive');
    expect(typeof ka.data.timestamp).toBe('number');
    for (const e of c.events) expect(e.id, e.event).toMatch(/^\d+$/);
    // ids never go backwards
    const ids = c.events.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it('mark-all-read sends notification_updated for every changed notification, then the count', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const made = [];
    for (let i = 0; i < 12; i++) made.push(await app.notifications.createForUser(u.id, note(`m${i}`)));
    const c = await open(u);
    await c.waitFor((e) => e.event === 'connected');
    const res = await app.inject({
      method: 'PATCH',
      url: '/notification/mark-all-read',
      headers: { origin: 'http://localhost:3000', cookie: u.cookie },
    });
    expect(res.json()).toEqual({ updatedCount: 12 });
    const count = await c.waitFor((e) => e.event === 'unread_count_changed');
    expect(count.data).toEqual({ type: 'unread_count_changed', unreadCount: 0 });
    const updated = c.events.filter((e) => e.event === 'notification_updated');
    expect(updated.map((e) => (e.data.notification as { id: string }).id)).toEqual(made.map((n) => n.id));
    for (const e of updated) {
      expect(e.data).toMatchObject({
        type: 'notification_updated',
        notification: { read: true, userId: u.id },
      });
      expect(e.id).toMatch(/^\d+$/);
    }
  });

  it('delivers to every tab of a user and only to that user', async () => {
    const [u, other] = await Promise.all([
      createVerifiedUser(app, env.smtp),
      createVerifiedUser(app, env.smtp),
    ]);
    const [t1, t2, o] = await Promise.all([open(u), open(u), open(other)]);
    await Promise.all([t1, t2, o].map((c) => c.waitFor((e) => e.event === 'connected')));
    const n = await app.notifications.createForUser(u.id, note('tabs'));
    const [a, b] = await Promise.all([
      t1.waitFor((e) => e.event === 'new_notification'),
      t2.waitFor((e) => e.event === 'new_notification'),
    ]);
    expect(a.data).toEqual(b.data);
    expect(a.id).toBe(b.id);
    expect((a.data.notification as { id: string }).id).toBe(n.id);
    await t1.waitFor((e) => e.event === 'keep_alive');
    expect(o.events.some((e) => e.event === 'new_notification')).toBe(false);
    t1.close();
    // the other tab keeps working after one closes
    await app.notifications.createForUser(u.id, note('after close'));
    await t2.waitFor(
      (e) =>
        e.event === 'new_notification' && (e.data.notification as { title: string }).title === 'after close',
    );
  });

  it('resumes with Last-Event-ID: exactly the missed notifications, in order, no duplicates', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const c1 = await open(u);
    await c1.waitFor((e) => e.event === 'connected');
    await app.notifications.createForUser(u.id, note('seen-1'));
    await app.notifications.createForUser(u.id, note('seen-2'));
    await c1.waitFor(
      (e) => e.event === 'new_notification' && (e.data.notification as { title: string }).title === 'seen-2',
    );
    await c1.waitFor((e) => e.event === 'unread_count_changed' && e.data.unreadCount === 2);
    const lastId = c1.events[c1.events.length - 1]?.id;
    c1.close();
    await c1.ended;
    const missed = [];
    for (const t of ['missed-1', 'missed-2', 'missed-3'])
      missed.push(await app.notifications.createForUser(u.id, note(t)));
    const c2 = await open(u, lastId);
    await c2.waitFor(
      (e) =>
        e.event === 'new_notification' && (e.data.notification as { title: string }).title === 'missed-3',
    );
    await app.notifications.createForUser(u.id, note('live-after-resume'));
    await c2.waitFor(
      (e) =>
        e.event === 'new_notification' &&
        (e.data.notification as { title: string }).title === 'live-after-resume',
    );
    expect(c2.events[0]?.event).toBe('connected');
    expect(c2.events[0]?.data.unreadCount).toBe(5);
    const titles = c2.events
      .filter((e) => e.event === 'new_notification')
      .map((e) => (e.data.notification as { title: string }).title);
    expect(titles).toEqual(['missed-1', 'missed-2', 'missed-3', 'live-after-resume']);
    // a fresh connection without Last-Event-ID replays nothing
    const c3 = await open(u);
    await c3.waitFor((e) => e.event === 'keep_alive');
    expect(c3.events.filter((e) => e.event === 'new_notification')).toEqual([]);
    // garbage Last-Event-ID is treated as a fresh connection
    const c4 = await open(u, '-1 abc');
    await c4.waitFor((e) => e.event === 'keep_alive');
    expect(c4.events.filter((e) => e.event === 'new_notification')).toEqual([]);
  });

  it('closes the stream with an error event when the user is banned', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const c = await open(u);
    await c.waitFor((e) => e.event === 'connected');
    const res = await app.inject({
      method: 'POST',
      url: '/auth/admin/ban-user',
      headers: jsonHeaders(admin.cookie),
      payload: { userId: u.id },
    });
    expect(res.statusCode).toBe(200);
    const err = await c.waitFor((e) => e.event === 'error');
    expect(err.data).toMatchObject({ type: 'error', code: 'SESSION_REVOKED' });
    await c.ended;
    // and cannot reconnect
    const again = await open(u);
    expect(again.status).toBe(401);
  });

  it('drops a client that stops reading once its buffer passes the bound', async () => {
    const small = await env.app({ SSE_MAX_BUFFERED_BYTES: '65536' });
    const smallUrl = await small.listen({ port: 0, host: '127.0.0.1' });
    const u = await createVerifiedUser(small, env.smtp);
    const c = await open(u, undefined, smallUrl);
    await c.waitFor((e) => e.event === 'connected');
    c.pause();
    expect(small.notificationStreams.stats().streams).toBe(1);
    const big = 'x'.repeat(100_000);
    for (let i = 0; i < 400 && small.notificationStreams.stats().streams > 0; i++) {
      await small.ctx.realtime.bus.publish(NOTIFICATION_EVENTS_TOPIC, {
        kind: 'user',
        userId: u.id,
        // Seqs follow the fresh user's cursor (0), so every one is deliverable in order.
        events: [{ seq: i + 1, name: 'notification_updated', data: { notification: { big } } }],
      });
      await new Promise((r) => setImmediate(r));
    }
    expect(small.notificationStreams.stats().streams).toBe(0);
  });

  it('on shutdown sends SHUTTING_DOWN, ends streams and refuses new ones with 503', async () => {
    const other = await env.app();
    const otherUrl = await other.listen({ port: 0, host: '127.0.0.1' });
    const u = await createVerifiedUser(other, env.smtp);
    const c = await open(u, undefined, otherUrl);
    await c.waitFor((e) => e.event === 'connected');
    const shutdown = other.ctx.lifecycle.shutdown();
    const err = await c.waitFor((e) => e.event === 'error');
    expect(err.data).toMatchObject({ code: 'SHUTTING_DOWN' });
    await c.ended;
    const res = await other.inject({
      method: 'GET',
      url: '/notification/stream',
      headers: { cookie: u.cookie },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().code).toBe('UNAVAILABLE');
    await shutdown;
  });

  it('app.close() tells open streams before closing connections', async () => {
    const other = await env.app();
    const otherUrl = await other.listen({ port: 0, host: '127.0.0.1' });
    const u = await createVerifiedUser(other, env.smtp);
    const c = await open(u, undefined, otherUrl);
    await c.waitFor((e) => e.event === 'connected');
    await other.close();
    await c.ended;
    expect(c.events.some((e) => e.event === 'error' && e.data.code === 'SHUTTING_DOWN')).toBe(true);
  });
});
