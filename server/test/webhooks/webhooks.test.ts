// Webhooks end to end against a real HTTP receiver on loopback: admin CRUD, validation and access; every event
// type fired by the module that owns it (admin send, mark read, email sent/failed through the real SMTP capture,
// chat over a real WebSocket, sign-up); signatures checked with an independent HMAC; retries through 500s and a
// receiver that is down; redirects not followed; a broadcast queued in bulk with no HTTP call in the request path.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { systemResolver } from '../../src/webhooks/ssrf.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import {
  createAdmin,
  createVerifiedUser,
  jsonHeaders,
  type TestUser,
  uniqueEmail,
} from '../helpers/users.js';
import {
  bodyOf,
  type Received,
  resetWebhooks,
  startReceiver,
  verifySignature,
  type WebhookReceiver,
} from '../helpers/webhook-receiver.js';
import { openChat } from '../helpers/ws-client.js';

interface CreatedHook {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  createdAt: string;
  secret: string;
}

interface Delivery {
  id: string;
  type: string;
  status: string;
  statusCode: number | null;
  attempt: number;
  nextRetryAt: string | null;
  error: string | null;
  deliveredAt: string | null;
}

describe('webhooks', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  const receivers: WebhookReceiver[] = [];

  const receiver = async () => {
    const r = await startReceiver();
    receivers.push(r);
    return r;
  };
  const create = (payload: Record<string, unknown>, cookie: string | undefined = admin.cookie) =>
    app.inject({ method: 'POST', url: '/admin/webhooks', headers: jsonHeaders(cookie), payload });
  const createHook = async (url: string, events: string[]): Promise<CreatedHook> => {
    const res = await create({ url, events });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as CreatedHook;
  };
  const deliveries = async (id: string): Promise<Delivery[]> => {
    const res = await app.inject({
      method: 'GET',
      url: `/admin/webhooks/${id}/deliveries`,
      headers: jsonHeaders(admin.cookie),
    });
    expect(res.statusCode).toBe(200);
    return (res.json() as { deliveries: Delivery[] }).deliveries;
  };
  const until = async (check: () => Promise<boolean>, what: string) => {
    for (let i = 0; i < 600; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`never happened: ${what}`);
  };
  const sendTo = (target: TestUser, title: string) =>
    app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: jsonHeaders(admin.cookie),
      payload: {
        target: { scope: 'user', identifier: target.id },
        notification: { type: 'announcement', title, content: 'webhook test' },
      },
    });
  const ofType = (type: string) => (all: Received[]) => all.some((r) => bodyOf(r).type === type);

  beforeAll(async () => {
    env = await createTestEnv({
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_QUEUE_POLL_MS: '50',
      WEBHOOK_RETRY_BASE_MS: '50',
      WEBHOOK_TIMEOUT_MS: '5000',
      EMAIL_QUEUE_POLL_MS: '50',
      EMAIL_RETRY_BASE_MS: '10',
      EMAIL_MAX_ATTEMPTS: '2',
      BROADCAST_BATCH_SIZE: '100',
    });
    // Only pinned.example.test is answered by the test; every other name goes to the system resolver.
    app = await env.app(
      {},
      {
        webhookResolver: async (host) =>
          host === 'pinned.example.test' ? [{ address: '127.0.0.1', family: 4 }] : systemResolver(host),
      },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    [admin, user] = await Promise.all([createAdmin(app, env.smtp), createVerifiedUser(app, env.smtp)]);
  });
  afterEach(() => resetWebhooks(app));
  afterAll(async () => {
    await Promise.allSettled(receivers.map((r) => r.close()));
    await env?.close();
  });

  describe('admin routes', () => {
    it('creates, lists without the secret, deletes, and 404s unknown ids', async () => {
      const rx = await receiver();
      const res = await create({
        url: rx.url(),
        events: ['notification.created', 'user.created'],
        description: 'billing',
      });
      expect(res.statusCode).toBe(201);
      const created = res.json() as CreatedHook;
      expect(created).toMatchObject({
        url: rx.url(),
        events: ['notification.created', 'user.created'],
        description: 'billing',
      });
      expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      expect(Buffer.from(created.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
      // Stored sealed, never as given.
      const stored = rowsOf<{ secret: string }>(
        await app.ctx.database.db.execute(sql`select secret from webhook_endpoint where id = ${created.id}`),
      );
      expect(stored[0]?.secret).not.toContain(created.secret.slice(6));

      const list = await app.inject({
        method: 'GET',
        url: '/admin/webhooks',
        headers: jsonHeaders(admin.cookie),
      });
      expect(list.statusCode).toBe(200);
      const hooks = (list.json() as { webhooks: Array<Record<string, unknown>> }).webhooks;
      expect(hooks).toHaveLength(1);
      expect(hooks[0]).toMatchObject({ id: created.id, url: rx.url(), description: 'billing' });
      expect(hooks[0]).not.toHaveProperty('secret');
      expect(list.body).not.toContain(created.secret);

      expect(await deliveries(created.id)).toEqual([]);
      const del = await app.inject({
        method: 'DELETE',
        url: `/admin/webhooks/${created.id}`,
        headers: { cookie: admin.cookie, origin: TEST_ORIGIN },
      });
      expect(del.statusCode).toBe(200);
      expect(del.json()).toEqual({ id: created.id });
      for (const [method, url] of [
        ['DELETE', `/admin/webhooks/${created.id}`],
        ['DELETE', '/admin/webhooks/not-a-uuid'],
        ['GET', `/admin/webhooks/${randomUUID()}/deliveries`],
      ] as const) {
        const res404 = await app.inject({
          method,
          url,
          headers: { cookie: admin.cookie, origin: TEST_ORIGIN },
        });
        expect(res404.statusCode, `${method} ${url}`).toBe(404);
        expect(res404.json()).toMatchObject({ code: 'NOT_FOUND' });
      }
    });

    it('requires an admin session (401 without, 403 for a user) on every route', async () => {
      const id = randomUUID();
      const routes = [
        ['POST', '/admin/webhooks'],
        ['GET', '/admin/webhooks'],
        ['DELETE', `/admin/webhooks/${id}`],
        ['GET', `/admin/webhooks/${id}/deliveries`],
      ] as const;
      for (const [method, url] of routes) {
        const payload =
          method === 'POST' ? { url: 'http://127.0.0.1:1/x', events: ['user.created'] } : undefined;
        const headers = (cookie?: string) =>
          payload ? jsonHeaders(cookie) : { origin: TEST_ORIGIN, ...(cookie ? { cookie } : {}) };
        const anon = await app.inject({ method, url, headers: headers(), ...(payload ? { payload } : {}) });
        expect(anon.statusCode, `${method} ${url}`).toBe(401);
        const plain = await app.inject({
          method,
          url,
          headers: headers(user.cookie),
          ...(payload ? { payload } : {}),
        });
        expect(plain.statusCode, `${method} ${url}`).toBe(403);
      }
    });

    it('rejects invalid bodies with 400 in the error shape', async () => {
      const cases: Array<Record<string, unknown>> = [
        {},
        { url: 'ftp://127.0.0.1/x', events: ['user.created'] },
        { url: 'not a url', events: ['user.created'] },
        { url: 'javascript:alert(1)', events: ['user.created'] },
        { url: 'http://user:pw@127.0.0.1/x', events: ['user.created'] },
        { url: 'http://127.0.0.1/x', events: [] },
        { url: 'http://127.0.0.1/x', events: ['user.deleted'] },
        { url: 'http://127.0.0.1/x', events: ['user.created'], extra: true },
        { url: 'http://127.0.0.1/x', events: ['user.created'], description: 'x'.repeat(501) },
      ];
      for (const payload of cases) {
        const res = await create(payload);
        expect(res.statusCode, JSON.stringify(payload)).toBe(400);
        expect(res.json()).toMatchObject({ code: expect.any(String), message: expect.any(String) });
      }
    });
  });

  describe('delivery', () => {
    it('signs with Standard Webhooks headers (verified independently) and keeps the id across retries', async () => {
      const rx = await receiver();
      const hook = await createHook(rx.url(), ['notification.created']);
      // Two failures, then success.
      rx.respond = () => (rx.received.length <= 2 ? 500 : 204);
      const sent = await sendTo(user, 'signed');
      expect(sent.statusCode).toBe(200);
      await rx.until((all) => all.some((r) => r.answered === 204));
      expect(rx.received).toHaveLength(3);
      const [first] = rx.received;
      for (const r of rx.received) {
        expect(verifySignature(hook.secret, r)).toBe(true);
        expect(r.id).toBe(first?.id);
        expect(r.body).toBe(first?.body);
        expect(Math.abs(r.timestamp - Date.now() / 1000)).toBeLessThan(300);
      }
      expect(first?.id).toMatch(/^msg_/);
      // A wrong secret or a changed body does not verify.
      if (first) {
        expect(verifySignature(`whsec_${Buffer.alloc(32).toString('base64')}`, first)).toBe(false);
        expect(verifySignature(hook.secret, { ...first, body: `${first.body} ` })).toBe(false);
      }
      await until(async () => (await deliveries(hook.id))[0]?.status === 'delivered', 'delivered');
      const [log] = await deliveries(hook.id);
      expect(log).toMatchObject({
        id: first?.id,
        type: 'notification.created',
        status: 'delivered',
        statusCode: 204,
        attempt: 3,
        nextRetryAt: null,
        error: null,
      });
    });

    it('the documented verification snippet accepts a real delivery and refuses a tampered one', async () => {
      const readme = readFileSync(
        fileURLToPath(new URL('../../../docs/getting-started.md', import.meta.url)),
        'utf8',
      );
      const snippet = /```js\n(import \{ createHmac[\s\S]*?export function verifyWebhook[\s\S]*?)```/.exec(
        readme,
      )?.[1];
      expect(snippet).toBeDefined();
      const dir = mkdtempSync(path.join(tmpdir(), 'herald-readme-'));
      const file = path.join(dir, 'verify.mjs');
      writeFileSync(file, snippet ?? '');
      const { verifyWebhook } = (await import(pathToFileURL(file).href)) as {
        verifyWebhook: (secret: string, headers: Record<string, string>, body: string) => boolean;
      };
      rmSync(dir, { recursive: true, force: true });

      const rx = await receiver();
      const hook = await createHook(rx.url(), ['notification.created']);
      await sendTo(user, 'readme');
      await rx.until((all) => all.length >= 1);
      const r = rx.received[0] as Received;
      const headers = {
        'webhook-id': r.id,
        'webhook-timestamp': String(r.timestamp),
        'webhook-signature': r.signature,
      };
      expect(verifyWebhook(hook.secret, headers, r.body)).toBe(true);
      expect(verifyWebhook(hook.secret, headers, r.body.replace('readme', 'tampered'))).toBe(false);
      expect(
        verifyWebhook(hook.secret, { ...headers, 'webhook-timestamp': String(r.timestamp - 3600) }, r.body),
      ).toBe(false);
      expect(verifyWebhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, headers, r.body)).toBe(false);
    });

    it('keeps retrying while the receiver is down and delivers once it is back', async () => {
      const rx = await receiver();
      const hook = await createHook(rx.url(), ['notification.created']);
      await rx.down();
      expect((await sendTo(user, 'while down')).statusCode).toBe(200);
      await until(async () => {
        const [d] = await deliveries(hook.id);
        return (d?.attempt ?? 0) >= 2 && d?.status === 'pending';
      }, 'two failed attempts');
      const [failing] = await deliveries(hook.id);
      expect(failing?.error).toMatch(/ECONNREFUSED|connect/i);
      expect(failing?.statusCode).toBeNull();
      expect(failing?.nextRetryAt).not.toBeNull();
      await rx.up();
      await rx.until((all) => all.length >= 1);
      await until(async () => (await deliveries(hook.id))[0]?.status === 'delivered', 'delivered');
      expect(rx.received.filter((r) => r.answered === 200)).toHaveLength(1);
      expect(bodyOf(rx.received[0] as Received).data).toMatchObject({ title: 'while down' });
    });

    it('connects to the address it checked (pinned), whatever the name', async () => {
      // The system resolver does not know this name: a delivery proves the connection used the checked answer.
      const rx = await receiver();
      const hook = await createHook(`http://pinned.example.test:${rx.port}/hook`, ['notification.created']);
      await sendTo(user, 'pinned');
      await rx.until((all) => all.length >= 1);
      expect(rx.received[0]?.host).toBe(`pinned.example.test:${rx.port}`);
      expect(verifySignature(hook.secret, rx.received[0] as Received)).toBe(true);
    });

    it('never follows a redirect: a 3xx is a failed attempt', async () => {
      const [rx, elsewhere] = [await receiver(), await receiver()];
      const hook = await createHook(rx.url(), ['notification.created']);
      rx.respond = () => ({ status: 302, headers: { location: elsewhere.url('/stolen') } });
      await sendTo(user, 'redirected');
      await until(async () => (await deliveries(hook.id))[0]?.statusCode === 302, 'a 302 recorded');
      const [d] = await deliveries(hook.id);
      expect(d).toMatchObject({ status: 'pending', statusCode: 302 });
      expect(d?.error).toMatch(/redirect/);
      expect(elsewhere.received).toHaveLength(0);
    });

    it('queues a broadcast in bulk: one row per created notification, no HTTP call in the request path', async () => {
      const rx = await receiver();
      // The receiver answers nothing until the broadcast has returned: a request path that waited for
      // deliveries would never return.
      rx.respond = () => 'hang';
      const hook = await createHook(rx.url(), ['notification.created']);
      const tag = randomUUID().slice(0, 8);
      await app.ctx.database.db.execute(sql`
        insert into "user" (id, name, email, email_verified, created_at, updated_at)
        select 'bulk-' || ${tag} || '-' || g, 'Bulk ' || g, 'bulk-' || ${tag} || '-' || g || '@example.test', false, now(), now()
        from generate_series(1, 350) g`);
      const res = await app.inject({
        method: 'POST',
        url: '/admin/notifications/send',
        headers: jsonHeaders(admin.cookie),
        payload: {
          target: { scope: 'all' },
          notification: { type: 'announcement', title: `bulk ${tag}`, content: 'x' },
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      const { createdCount } = res.json() as { createdCount: number };
      expect(createdCount).toBeGreaterThanOrEqual(350);
      const [row] = rowsOf<{ n: number; events: number }>(
        await app.ctx.database.db.execute(sql`
          select count(*)::int as n, count(distinct event_id)::int as events from webhook_delivery
          where endpoint_id = ${hook.id} and type = 'notification.created'`),
      );
      expect(row).toEqual({ n: createdCount, events: createdCount });
      expect(rx.received.every((r) => r.answered === null)).toBe(true);
      // Bounded by the per-endpoint concurrency, whatever the backlog.
      expect(rx.received.length).toBeLessThanOrEqual(app.ctx.config.WEBHOOK_CONCURRENCY_PER_ENDPOINT);
      rx.releaseHung();
    });

    it('queues nothing when no endpoint subscribes to the event type', async () => {
      const rx = await receiver();
      await createHook(rx.url(), ['user.created']);
      expect(app.ctx.webhooks.events.wants('notification.created')).toBe(false);
      await sendTo(user, 'nobody listens');
      const [row] = rowsOf<{ n: number }>(
        await app.ctx.database.db.execute(sql`select count(*)::int as n from webhook_delivery`),
      );
      expect(row?.n).toBe(0);
    });
  });

  describe('events', () => {
    it('notification.created and notification.read carry the notification as the API returns it', async () => {
      const rx = await receiver();
      const hook = await createHook(rx.url(), ['notification.created', 'notification.read']);
      expect((await sendTo(user, 'event data')).statusCode).toBe(200);
      await rx.until(ofType('notification.created'));
      const created = bodyOf(rx.received.find((r) => bodyOf(r).type === 'notification.created') as Received);
      const list = await app.inject({
        method: 'GET',
        url: '/notification/list?limit=1',
        headers: jsonHeaders(user.cookie),
      });
      const [listed] = (list.json() as { notifications: Array<Record<string, unknown>> }).notifications;
      expect(created.data).toEqual(listed);
      expect(Date.parse(created.timestamp)).toBe(Date.parse(String(listed?.createdAt)));

      const patch = await app.inject({
        method: 'PATCH',
        url: `/notification/${String(listed?.id)}/read`,
        headers: jsonHeaders(user.cookie),
        payload: { read: true },
      });
      expect(patch.statusCode).toBe(200);
      await rx.until(ofType('notification.read'));
      const read = bodyOf(rx.received.find((r) => bodyOf(r).type === 'notification.read') as Received);
      expect(read.data).toEqual((patch.json() as { notification: unknown }).notification);
      for (const r of rx.received) expect(verifySignature(hook.secret, r)).toBe(true);
    });

    it('user.created on sign-up (no secrets), email.sent for the verification email', async () => {
      const rx = await receiver();
      await createHook(rx.url(), ['user.created', 'email.sent']);
      const email = uniqueEmail('hooked');
      const signed = await createVerifiedUser(app, env.smtp, { email });
      const sentTo = (r: Received) => bodyOf(r).type === 'email.sent' && bodyOf(r).data.to === email;
      await rx.until((all) => ofType('user.created')(all) && all.some(sentTo));
      const userEvent = bodyOf(rx.received.find((r) => bodyOf(r).type === 'user.created') as Received);
      expect(userEvent.data).toMatchObject({ id: signed.id, email, emailVerified: false, role: 'user' });
      expect(Object.keys(userEvent.data).sort()).toEqual(
        ['createdAt', 'email', 'emailVerified', 'id', 'image', 'name', 'role', 'updatedAt'].sort(),
      );
      const mail = bodyOf(rx.received.find(sentTo) as Received);
      expect(mail.data).toMatchObject({ to: email, kind: 'auth:verify', attempts: 1, error: null });
      expect(String(mail.data.subject)).toContain('Verify');
    });

    it('email.failed once an email is given up', async () => {
      const rx = await receiver();
      await createHook(rx.url(), ['email.failed', 'email.sent']);
      env.smtp.setFailing(true);
      const email = uniqueEmail('bounced');
      try {
        const signUp = await app.inject({
          method: 'POST',
          url: '/auth/sign-up/email',
          headers: jsonHeaders(),
          payload: { email, password: 'correct horse battery', name: 'Bounced' },
        });
        expect(signUp.statusCode).toBe(200);
        await rx.until(ofType('email.failed'));
      } finally {
        env.smtp.setFailing(false);
      }
      const failed = bodyOf(rx.received.find((r) => bodyOf(r).type === 'email.failed') as Received);
      expect(failed.data).toMatchObject({ to: email, kind: 'auth:verify', attempts: 2 });
      expect(String(failed.data.error)).toMatch(/451|unavailable/i);
      expect(rx.received.some((r) => bodyOf(r).type === 'email.sent' && bodyOf(r).data.to === email)).toBe(
        false,
      );
    });

    it('chat.message.created for a message sent over the WebSocket', async () => {
      const rx = await receiver();
      await createHook(rx.url(), ['chat.message.created']);
      const chat = await openChat(app, { cookie: user.cookie });
      try {
        const clientMessageId = randomUUID();
        chat.send({ type: 'send_message', message: 'hello hooks', clientMessageId });
        const echo = await chat.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
        await rx.until(ofType('chat.message.created'));
        const event = bodyOf(rx.received.find((r) => bodyOf(r).type === 'chat.message.created') as Received);
        // The §6 socket sees the message without its room; the webhook carries roomId and seq (§6.1).
        expect(event.data).toEqual({ ...echo.message, roomId: 'general', seq: expect.any(Number) });
      } finally {
        await chat.close();
      }
    });
  });

  // Lone UTF-16 surrogates (`\ud800` in JSON or a socket frame) reach the queued bodies through the event payloads;
  // PostgreSQL's jsonb refuses the escape, so the body is queued (and sent) with U+FFFD in their place.
  describe('lone surrogates in event payloads', () => {
    it('chat.message.created for a socket message with a lone surrogate is queued and delivered with U+FFFD', async () => {
      const rx = await receiver();
      const hook = await createHook(rx.url(), ['chat.message.created']);
      const chat = await openChat(app, { cookie: user.cookie });
      try {
        const clientMessageId = randomUUID();
        chat.send({ type: 'send_message', message: 'lone \ud800 and \udfff', clientMessageId });
        await chat.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
        await rx.until((all) =>
          all.some(
            (r) =>
              bodyOf(r).type === 'chat.message.created' && bodyOf(r).data.clientMessageId === clientMessageId,
          ),
        );
        const got = rx.received.find((r) => bodyOf(r).data.clientMessageId === clientMessageId) as Received;
        expect(bodyOf(got).data.message).toBe('lone \ufffd and \ufffd');
        expect(got.body).not.toMatch(/\\ud[89a-f]/i);
        expect(verifySignature(hook.secret, got)).toBe(true);
      } finally {
        await chat.close();
      }
    });

    it('notification.created for metadata with lone surrogates (values and keys) is delivered with U+FFFD', async () => {
      const rx = await receiver();
      await createHook(rx.url(), ['notification.created']);
      const res = await app.inject({
        method: 'POST',
        url: '/admin/notifications/send',
        headers: jsonHeaders(admin.cookie),
        payload: {
          target: { scope: 'user', identifier: user.id },
          notification: {
            type: 'info',
            title: 'surrogate hook \ud800',
            content: 'c',
            metadata: { actionGroupVariant: '\udfff', data: { '\ud800': 'v\udfff' } },
          },
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      await rx.until(ofType('notification.created'));
      const got = rx.received.find((r) => bodyOf(r).type === 'notification.created') as Received;
      expect(bodyOf(got).data).toMatchObject({
        title: 'surrogate hook \ufffd',
        metadata: { actionGroupVariant: '\ufffd', data: { '\ufffd': 'v\ufffd' } },
      });
      expect(got.body).not.toMatch(/\\ud[89a-f]/i);
    });
  });

  it('reports queue depth and failures in /metrics (JSON and Prometheus)', async () => {
    const rx = await receiver();
    await createHook(rx.url(), ['notification.created']);
    rx.respond = () => 503;
    await sendTo(user, 'metrics');
    await rx.until((all) => all.length >= 1);
    const json = await app.inject({ method: 'GET', url: '/metrics', headers: jsonHeaders(admin.cookie) });
    const report = json.json() as { webhooks: { pending: number; attemptFailures: number } };
    expect(report.webhooks.pending).toBeGreaterThanOrEqual(1);
    expect(report.webhooks.attemptFailures).toBeGreaterThanOrEqual(1);
    const text = await app.inject({
      method: 'GET',
      url: '/metrics?format=prometheus',
      headers: jsonHeaders(admin.cookie),
    });
    expect(text.body).toMatch(/^herald_webhook_queue_depth\{[^}]*\} [1-9]/m);
    expect(text.body).toMatch(/^herald_webhook_delivery_failures_total\{[^}]*\} [1-9]/m);
  });
});
