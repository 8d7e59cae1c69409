import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('delivery strategies and the email outbox', () => {
  let env: TestEnv;
  let app: App;
  let url: string;
  const clients: SseClient[] = [];

  const mailsTo = (email: string) =>
    env.smtp.messages.filter((m) => m.to.includes(email) && !m.subject.includes('Verify'));
  const outboxRows = async (a: App, notificationId: string) =>
    rowsOf<{ status: string; attempts: string }>(
      await a.ctx.database.db.execute(
        sql`select status, attempts::text from email_outbox where dedupe_key = ${`notification:${notificationId}`}`,
      ),
    );
  const waitOutbox = async (a: App, notificationId: string, status: string) => {
    for (let i = 0; i < 200; i++) {
      const rows = await outboxRows(a, notificationId);
      if (rows[0]?.status === status) return rows;
      await settle(25);
    }
    throw new Error(`outbox row never reached ${status}`);
  };
  const online = async (u: TestUser, base = url) => {
    const c = await openStream(base, u.cookie);
    clients.push(c);
    await c.waitFor((e) => e.event === 'connected');
    return c;
  };

  beforeAll(async () => {
    env = await createTestEnv({
      EMAIL_QUEUE_POLL_MS: '100',
      EMAIL_RETRY_BASE_MS: '100',
      PRESENCE_DEBOUNCE_MS: '0',
    });
    app = await env.app();
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await env.close();
  });

  it('online user: delivered over SSE, no email', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const c = await online(u);
    const n = await app.notifications.createForUser(u.id, {
      type: 'mention',
      title: 'live only',
      content: 'x',
    });
    await c.waitFor((e) => e.event === 'new_notification');
    // The outbox is the only path to SMTP: no row means no email, now or later.
    expect(await outboxRows(app, n.id)).toEqual([]);
    expect(mailsTo(u.email)).toEqual([]);
  });

  it('offline user with the type enabled: exactly one escaped email with a text part and the page link', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const n = await app.notifications.createForUser(u.id, {
      type: 'mention',
      title: 'Hi <b>there</b>',
      content: '<script>alert(1)</script> & more',
    });
    const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject.includes('there'));
    expect(mail.subject).toBe('Hi <b>there</b>');
    expect(mail.html).not.toContain('<script>');
    expect(mail.html).toContain('&lt;script&gt;');
    expect(mail.html).toContain('http://localhost:3000/notifications');
    expect(mail.text).toContain('<script>alert(1)</script> & more');
    expect(mail.text).toContain('http://localhost:3000/notifications');
    await waitOutbox(app, n.id, 'sent');
    expect(mailsTo(u.email)).toHaveLength(1);
  });

  it('offline user with the type disabled (or email off): no email', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    // 'info' is not in the default email set
    const a = await app.notifications.createForUser(u.id, {
      type: 'info',
      title: 'not by default',
      content: 'x',
    });
    await app.inject({
      method: 'PATCH',
      url: '/notification/preferences',
      headers: jsonHeaders(u.cookie),
      payload: { emailEnabled: false },
    });
    const b = await app.notifications.createForUser(u.id, {
      type: 'mention',
      title: 'email off',
      content: 'x',
    });
    expect(await outboxRows(app, a.id)).toEqual([]);
    expect(await outboxRows(app, b.id)).toEqual([]);
    await app.inject({
      method: 'PATCH',
      url: '/notification/preferences',
      headers: jsonHeaders(u.cookie),
      payload: { emailEnabled: true, emailTypes: ['info'] },
    });
    const c = await app.notifications.createForUser(u.id, {
      type: 'info',
      title: 'now enabled',
      content: 'x',
    });
    const d = await app.notifications.createForUser(u.id, {
      type: 'mention',
      title: 'now disabled',
      content: 'x',
    });
    await waitOutbox(app, c.id, 'sent');
    expect(await outboxRows(app, d.id)).toEqual([]);
    expect(mailsTo(u.email).map((m) => m.subject)).toEqual(['now enabled']);
  });

  it('honours the override order: email before sse mails an online user; sse before email does not', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    await online(u);
    const first = await app.notifications.createForUser(
      u.id,
      { type: 'mention', title: 'email first', content: 'x' },
      { strategies: ['email', 'sse'] },
    );
    const second = await app.notifications.createForUser(
      u.id,
      { type: 'mention', title: 'sse first', content: 'x' },
      { strategies: ['sse', 'email'] },
    );
    const pushOnly = await app.notifications.createForUser(
      u.id,
      { type: 'mention', title: 'push only', content: 'x' },
      { strategies: ['push'] },
    );
    await waitOutbox(app, first.id, 'sent');
    expect(await outboxRows(app, second.id)).toEqual([]);
    expect(await outboxRows(app, pushOnly.id)).toEqual([]);
    // push never delivers, so an offline user falls through to email
    const v = await createVerifiedUser(app, env.smtp);
    const viaPush = await app.notifications.createForUser(
      v.id,
      { type: 'mention', title: 'push then email', content: 'x' },
      { strategies: ['push', 'email'] },
    );
    await waitOutbox(app, viaPush.id, 'sent');
  });

  it('SMTP outage: retried with backoff and delivered exactly once when it comes back', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    env.smtp.setFailing(true);
    try {
      const n = await app.notifications.createForUser(u.id, {
        type: 'warning',
        title: 'during outage',
        content: 'x',
      });
      for (let i = 0; i < 200; i++) {
        const [row] = await outboxRows(app, n.id);
        if (row && Number(row.attempts) >= 2) break;
        await settle(25);
      }
      const [row] = await outboxRows(app, n.id);
      expect(row?.status).toBe('pending');
      expect(Number(row?.attempts)).toBeGreaterThanOrEqual(2);
      env.smtp.setFailing(false);
      await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject === 'during outage');
      await waitOutbox(app, n.id, 'sent');
      expect(mailsTo(u.email)).toHaveLength(1);
    } finally {
      env.smtp.setFailing(false);
    }
  });

  it('queued email survives an instance restart and several workers send it once', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    env.smtp.setFailing(true);
    const tmp = await env.app({ EMAIL_QUEUE_POLL_MS: '100', EMAIL_RETRY_BASE_MS: '100' });
    const n = await tmp.notifications.createForUser(u.id, {
      type: 'warning',
      title: 'restart proof',
      content: 'x',
    });
    await tmp.close();
    // two more instances now drain the same outbox
    const [b, c] = await Promise.all([
      env.app({ EMAIL_QUEUE_POLL_MS: '50', EMAIL_RETRY_BASE_MS: '50' }),
      env.app({ EMAIL_QUEUE_POLL_MS: '50', EMAIL_RETRY_BASE_MS: '50' }),
    ]);
    env.smtp.setFailing(false);
    await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject === 'restart proof');
    await waitOutbox(app, n.id, 'sent');
    await settle(300);
    expect(mailsTo(u.email)).toHaveLength(1);
    await Promise.all([b.close(), c.close()]);
  });

  it('cross-instance: a stream on B gets a notification created on A, and no email is sent', async () => {
    const b = await env.app({ PRESENCE_DEBOUNCE_MS: '0' });
    const bUrl = await b.listen({ port: 0, host: '127.0.0.1' });
    const u = await createVerifiedUser(app, env.smtp);
    const stream = await online(u, bUrl);
    // presence is reflected cluster-wide (A sees the user online on B)
    for (let i = 0; i < 100 && !(await app.ctx.realtime.presence.isOnline(u.id)); i++) await settle(20);
    expect(await app.ctx.realtime.presence.isOnline(u.id)).toBe(true);
    const n = await app.notifications.createForUser(u.id, { type: 'mention', title: 'from A', content: 'x' });
    const ev = await stream.waitFor((e) => e.event === 'new_notification');
    expect((ev.data.notification as { id: string }).id).toBe(n.id);
    expect(await outboxRows(app, n.id)).toEqual([]);
    stream.close();
    await b.close();
  });
});
