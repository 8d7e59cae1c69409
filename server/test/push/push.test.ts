// Web Push end to end against our own push service on loopback (test/helpers/push-service.ts), which checks
// every VAPID token and decrypts every message independently of the library that encrypted it: the routes and
// their bad input, SSRF refusals, delivery to several browsers, not while a stream is live, preferences and
// types, strategy order and override, 410 → removed, 429 + Retry-After → retried once, 500 → retried, other 4xx
// not retried, a slow push service not delaying another, webhook events, metrics and the admin view.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { generateVapidKeys, loadConfig } from '../../src/config.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { startPushService, type TestPushService } from '../helpers/push-service.js';
import { openStream } from '../helpers/sse-client.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { startReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const vapid = generateVapidKeys();

describe('web push', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let push: TestPushService;
  let push2: TestPushService;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    env = await createTestEnv({
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:ops@example.com',
      PUSH_ALLOW_PRIVATE_ENDPOINTS: 'true',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      PUSH_QUEUE_POLL_MS: '50',
      PUSH_RETRY_BASE_MS: '20',
      PUSH_TTL_SECONDS: '3600',
      PUSH_CONCURRENCY: '4',
      PUSH_CONCURRENCY_PER_SERVICE: '2',
      WEBHOOK_QUEUE_POLL_MS: '50',
    });
    app = await env.app();
    admin = await createAdmin(app, env.smtp);
    push = await startPushService({ vapidPublicKey: vapid.publicKey });
    push2 = await startPushService({ vapidPublicKey: vapid.publicKey });
    hooks = await startReceiver();
    const created = await app.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: jsonHeaders(admin.cookie),
      payload: { url: hooks.url(), events: ['push.sent', 'push.failed'] },
    });
    expect(created.statusCode).toBe(201);
  });
  afterAll(async () => {
    await env?.close();
    await push?.close();
    await push2?.close();
    await hooks?.close();
  });

  const call = (method: string, url: string, cookie?: string, payload?: unknown) =>
    app.inject({
      method: method as 'GET',
      url,
      headers: payload === undefined ? (cookie ? { cookie } : {}) : jsonHeaders(cookie),
      ...(payload === undefined ? {} : { payload: payload as object }),
    });

  const subscribe = async (user: TestUser, service = push) => {
    const browser = service.browser();
    const res = await call('POST', '/notification/push/subscriptions', user.cookie, browser.subscription);
    expect(res.statusCode, res.body).toBe(201);
    return { browser, id: (res.json() as { subscription: { id: string } }).subscription.id };
  };

  const pushUser = async (prefs: Record<string, unknown> = { pushEnabled: true }) => {
    const user = await createVerifiedUser(app, env.smtp);
    const res = await call('PATCH', '/notification/preferences', user.cookie, prefs);
    expect(res.statusCode).toBe(200);
    return user;
  };

  const send = async (user: TestUser, notification: Record<string, unknown>) => {
    const res = await call('POST', '/admin/notifications/send', admin.cookie, {
      target: { scope: 'user', identifier: user.id },
      notification: { type: 'message', title: 'Hello', content: 'World', ...notification },
    });
    expect(res.statusCode, res.body).toBe(200);
    const list = await call('GET', '/notification/list?limit=1', user.cookie);
    return (list.json() as { notifications: Array<{ id: string; createdAt: string }> }).notifications[0] as {
      id: string;
      createdAt: string;
    };
  };

  const deliveries = async (notificationId: string) => {
    const res = await call('GET', `/admin/push/deliveries?notificationId=${notificationId}`, admin.cookie);
    expect(res.statusCode).toBe(200);
    return (
      res.json() as {
        deliveries: Array<{
          status: string;
          attempts: number;
          statusCode: number | null;
          error: string | null;
        }>;
      }
    ).deliveries;
  };

  const waitForStatus = async (notificationId: string, status: string, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const rows = await deliveries(notificationId);
      if (rows.length > 0 && rows.every((r) => r.status === status)) return rows;
      if (Date.now() > deadline) throw new Error(`deliveries not ${status}: ${JSON.stringify(rows)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  describe('routes', () => {
    it('serves the public key without a session', async () => {
      const res = await call('GET', '/notification/push/public-key');
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ publicKey: vapid.publicKey });
    });

    it('subscribes idempotently per endpoint, moves ownership, lists and deletes', async () => {
      const a = await pushUser();
      const b = await pushUser();
      const browser = push.browser();
      const first = await call('POST', '/notification/push/subscriptions', a.cookie, browser.subscription);
      expect(first.statusCode).toBe(201);
      const sub = (first.json() as { subscription: { id: string; endpoint: string; createdAt: string } })
        .subscription;
      expect(sub.endpoint).toBe(browser.subscription.endpoint);
      const again = await call('POST', '/notification/push/subscriptions', a.cookie, browser.subscription);
      expect(again.statusCode).toBe(200);
      expect((again.json() as { subscription: { id: string } }).subscription.id).toBe(sub.id);
      // Another user signs in on that browser: same id, now theirs.
      const moved = await call('POST', '/notification/push/subscriptions', b.cookie, browser.subscription);
      expect(moved.statusCode).toBe(200);
      expect((moved.json() as { subscription: { id: string } }).subscription.id).toBe(sub.id);
      const listA = await call('GET', '/notification/push/subscriptions', a.cookie);
      expect((listA.json() as { subscriptions: unknown[] }).subscriptions).toEqual([]);
      const listB = await call('GET', '/notification/push/subscriptions', b.cookie);
      expect(
        (listB.json() as { subscriptions: Array<{ id: string }> }).subscriptions.map((s) => s.id),
      ).toEqual([sub.id]);
      // Not a's any more: 404, and nothing removed.
      expect((await call('DELETE', `/notification/push/subscriptions/${sub.id}`, a.cookie)).statusCode).toBe(
        404,
      );
      const del = await call('DELETE', `/notification/push/subscriptions/${sub.id}`, b.cookie);
      expect(del.statusCode).toBe(200);
      expect(del.json()).toEqual({ id: sub.id });
      expect((await call('DELETE', `/notification/push/subscriptions/${sub.id}`, b.cookie)).statusCode).toBe(
        404,
      );
    });

    it('answers bad input with 4xx on every route', async () => {
      const user = await pushUser();
      const good = push.browser().subscription;
      const bad: Array<[string, unknown]> = [
        ['missing keys', { endpoint: good.endpoint }],
        ['extra key', { ...good, extra: 1 }],
        ['extra key in keys', { ...good, keys: { ...good.keys, x: 'y' } }],
        ['endpoint not a URL', { ...good, endpoint: 'not a url' }],
        ['endpoint not http(s)', { ...good, endpoint: 'ftp://127.0.0.1/x' }],
        ['endpoint with credentials', { ...good, endpoint: 'http://u:p@127.0.0.1/x' }],
        ['endpoint too long', { ...good, endpoint: `${good.endpoint}/${'a'.repeat(2100)}` }],
        ['endpoint with NUL', { ...good, endpoint: `${good.endpoint}\u0000` }],
        ['p256dh not base64url', { ...good, keys: { ...good.keys, p256dh: 'not base64!' } }],
        [
          'p256dh too short',
          { ...good, keys: { ...good.keys, p256dh: Buffer.alloc(33, 4).toString('base64url') } },
        ],
        [
          'p256dh not on the curve',
          {
            ...good,
            keys: {
              ...good.keys,
              p256dh: Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 1)]).toString('base64url'),
            },
          },
        ],
        [
          'auth wrong length',
          { ...good, keys: { ...good.keys, auth: Buffer.alloc(15).toString('base64url') } },
        ],
        ['auth not a string', { ...good, keys: { ...good.keys, auth: 16 } }],
        ['expirationTime negative', { ...good, expirationTime: -1 }],
        ['expirationTime a string', { ...good, expirationTime: 'tomorrow' }],
        ['an array', [good]],
      ];
      for (const [label, body] of bad) {
        const res = await call('POST', '/notification/push/subscriptions', user.cookie, body);
        expect(res.statusCode, label).toBe(400);
        expect((res.json() as { code: string }).code, label).toMatch(/^(VALIDATION_ERROR|INVALID_JSON)$/);
      }
      const invalidJson = await app.inject({
        method: 'POST',
        url: '/notification/push/subscriptions',
        headers: jsonHeaders(user.cookie),
        payload: '{"endpoint":',
      });
      expect(invalidJson.statusCode).toBe(400);
      const huge = await app.inject({
        method: 'POST',
        url: '/notification/push/subscriptions',
        headers: jsonHeaders(user.cookie),
        payload: JSON.stringify({ ...good, pad: 'x'.repeat(70 * 1024) }),
      });
      expect(huge.statusCode).toBe(413);
      // Without a session.
      expect((await call('POST', '/notification/push/subscriptions', undefined, good)).statusCode).toBe(401);
      expect((await call('GET', '/notification/push/subscriptions')).statusCode).toBe(401);
      expect((await call('DELETE', '/notification/push/subscriptions/x')).statusCode).toBe(401);
      // Malformed, unknown or oversized ids (beyond the router's parameter length): 404.
      expect(
        (await call('DELETE', '/notification/push/subscriptions/not-a-uuid', user.cookie)).statusCode,
      ).toBe(404);
      expect(
        (
          await call(
            'DELETE',
            '/notification/push/subscriptions/00000000-0000-4000-8000-000000000000',
            user.cookie,
          )
        ).statusCode,
      ).toBe(404);
      expect(
        (await call('DELETE', `/notification/push/subscriptions/${'a'.repeat(200)}`, user.cookie)).statusCode,
      ).toBe(404);
      // Admin view: session, role, query.
      expect((await call('GET', '/admin/push/deliveries?notificationId=x')).statusCode).toBe(401);
      expect((await call('GET', '/admin/push/deliveries?notificationId=x', user.cookie)).statusCode).toBe(
        403,
      );
      expect((await call('GET', '/admin/push/deliveries', admin.cookie)).statusCode).toBe(400);
      expect(
        (await call('GET', '/admin/push/deliveries?notificationId=x&limit=0', admin.cookie)).statusCode,
      ).toBe(400);
      expect(
        (await call('GET', '/admin/push/deliveries?notificationId=x&bogus=1', admin.cookie)).statusCode,
      ).toBe(400);
      expect((await call('GET', '/admin/push/deliveries?notificationId=x', admin.cookie)).json()).toEqual({
        deliveries: [],
      });
    });

    it('refuses private, loopback and http endpoints unless PUSH_ALLOW_PRIVATE_ENDPOINTS', async () => {
      const strict = await env.app(
        { PUSH_ALLOW_PRIVATE_ENDPOINTS: 'false' },
        {
          pushResolver: async (host) => {
            if (host === 'rebind.example') return [{ address: '10.1.2.3', family: 4 }];
            if (host === 'mixed.example')
              return [
                { address: '93.184.215.14', family: 4 },
                { address: '169.254.169.254', family: 4 },
              ];
            if (host === 'push.example') return [{ address: '93.184.215.14', family: 4 }];
            throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
          },
        },
      );
      const user = await pushUser();
      const keys = push.browser().subscription.keys;
      const attempt = (endpoint: string) =>
        strict.inject({
          method: 'POST',
          url: '/notification/push/subscriptions',
          headers: jsonHeaders(user.cookie),
          payload: { endpoint, keys },
        });
      for (const endpoint of [
        'http://push.example/send/1',
        'https://127.0.0.1/send/1',
        'https://[::1]/send/1',
        'https://169.254.169.254/latest',
        'https://10.0.0.8/x',
        'https://[fd00::1]/x',
        'https://rebind.example/x',
        'https://mixed.example/x',
        'https://nowhere.example/x',
      ]) {
        const res = await attempt(endpoint);
        expect(res.statusCode, endpoint).toBe(400);
        const body = res.json() as { code: string; details: Array<{ path: string }> };
        expect(body.code).toBe('VALIDATION_ERROR');
        expect(body.details[0]?.path).toBe('endpoint');
      }
      expect((await attempt('https://push.example/send/1')).statusCode).toBe(201);
      // Its worker would refuse the loopback push service of the other tests (rightly so).
      await strict.close();
    });

    it('development: a key pair is generated into DATA_DIR once and reused; production does not generate one', async () => {
      const { mkdtempSync, readFileSync, rmSync, existsSync } = await import('node:fs');
      const { tmpdir } = await import('node:os');
      const path = await import('node:path');
      const dir = mkdtempSync(path.join(tmpdir(), 'herald-vapid-'));
      try {
        const dev = { NODE_ENV: 'development', DATA_DIR: dir };
        const first = loadConfig(dev).vapid;
        expect(first?.publicKey).toMatch(/^[A-Za-z0-9_-]{87}$/);
        expect(first?.subject).toMatch(/^mailto:/);
        const stored = JSON.parse(readFileSync(path.join(dir, 'vapid-keys.json'), 'utf8')) as {
          publicKey: string;
          privateKey: string;
        };
        expect(stored.publicKey).toBe(first?.publicKey);
        // A restart keeps the pair (browsers subscribed with it keep working).
        expect(loadConfig(dev).vapid?.publicKey).toBe(first?.publicKey);
        const prodDir = path.join(dir, 'prod');
        const { VAPID_PUBLIC_KEY: _p, VAPID_PRIVATE_KEY: _k, VAPID_SUBJECT: _s, ...rest } = env.baseEnv;
        expect(loadConfig({ ...rest, NODE_ENV: 'production', DATA_DIR: prodDir }).vapid).toBeNull();
        expect(existsSync(path.join(prodDir, 'vapid-keys.json'))).toBe(false);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('push off: public key and subscribe answer 404 PUSH_NOT_CONFIGURED; a partial key set stops start-up', async () => {
      const { VAPID_PUBLIC_KEY: _p, VAPID_PRIVATE_KEY: _k, VAPID_SUBJECT: _s, ...rest } = env.baseEnv;
      const base = { ...rest, NODE_ENV: 'production' };
      expect(loadConfig(base).vapid).toBeNull();
      expect(() => loadConfig({ ...base, VAPID_PUBLIC_KEY: vapid.publicKey })).toThrow(
        /missing VAPID_PRIVATE_KEY, VAPID_SUBJECT/,
      );
      expect(() =>
        loadConfig({
          ...base,
          VAPID_PUBLIC_KEY: generateVapidKeys().publicKey,
          VAPID_PRIVATE_KEY: vapid.privateKey,
          VAPID_SUBJECT: 'mailto:a@b.c',
        }),
      ).toThrow(/not one key pair/);
      expect(() => loadConfig({ ...base, VAPID_SUBJECT: 'ops@example.com' })).toThrow(/VAPID_SUBJECT/);
      const off = await env.app({
        NODE_ENV: 'production',
        VAPID_PUBLIC_KEY: '',
        VAPID_PRIVATE_KEY: '',
        VAPID_SUBJECT: '',
      });
      const key = await off.inject({ method: 'GET', url: '/notification/push/public-key' });
      expect(key.statusCode).toBe(404);
      expect((key.json() as { code: string }).code).toBe('PUSH_NOT_CONFIGURED');
      const user = await pushUser();
      const res = await off.inject({
        method: 'POST',
        url: '/notification/push/subscriptions',
        headers: jsonHeaders(user.cookie),
        payload: push.browser().subscription,
      });
      expect(res.statusCode).toBe(404);
      await off.close();
    });
  });

  describe('delivery', () => {
    it('sends one verified, decryptable message to each of several browsers', async () => {
      const user = await pushUser();
      const one = await subscribe(user);
      const two = await subscribe(user);
      const n = await send(user, {
        title: 'Deploy finished',
        content: 'All green',
        metadata: {
          priority: 'urgent',
          actions: [{ actionId: 'o', type: 'link', label: 'Open', url: '/deploys/7' }],
        },
      });
      await push.until(() => push.accepted.filter((m) => m.payload.id === n.id).length === 2);
      const got = push.accepted.filter((m) => m.payload.id === n.id);
      expect(new Set(got.map((m) => m.token))).toEqual(new Set([one.browser.token, two.browser.token]));
      for (const m of got) {
        expect(m.payload).toEqual({
          id: n.id,
          type: 'message',
          title: 'Deploy finished',
          content: 'All green',
          url: 'http://localhost:3000/deploys/7',
          createdAt: n.createdAt,
        });
        expect(m.headers.urgency).toBe('high');
        expect(m.headers.topic).toBe(n.id.replaceAll('-', ''));
        expect(Number(m.headers.ttl)).toBeGreaterThan(3500);
        expect(Number(m.headers.ttl)).toBeLessThanOrEqual(3600);
        expect(m.claims.aud).toBe(push.origin);
        expect(m.claims.sub).toBe('mailto:ops@example.com');
      }
      const rows = await waitForStatus(n.id, 'sent');
      expect(rows).toHaveLength(2);
      await hooks.until((all) => all.some((r) => r.body.includes('"push.sent"') && r.body.includes(n.id)));
      expect(push.errors).toEqual([]);
    });

    it('does not push while the user has a live stream', async () => {
      const user = await pushUser();
      await subscribe(user);
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      const stream = await openStream(url, user.cookie);
      try {
        await stream.waitFor((e) => e.event === 'connected');
        const n = await send(user, {});
        await stream.waitFor((e) => e.event === 'new_notification');
        // Delivery ran inside the send request: nothing was queued.
        expect(await deliveries(n.id)).toEqual([]);
      } finally {
        stream.close();
      }
    });

    it('follows pushEnabled and pushTypes', async () => {
      const off = await pushUser({ pushEnabled: false });
      await subscribe(off);
      expect(await deliveries((await send(off, {})).id)).toEqual([]);
      const typed = await pushUser({ pushEnabled: true, pushTypes: ['success'] });
      await subscribe(typed);
      // `message` is not among this user's types; `success` is (and not among the default email types).
      expect(await deliveries((await send(typed, { type: 'message' })).id)).toEqual([]);
      const warned = await send(typed, { type: 'success' });
      await waitForStatus(warned.id, 'sent');
      // No subscription: not delivered by push (and no row).
      const bare = await pushUser();
      expect(await deliveries((await send(bare, {})).id)).toEqual([]);
    });

    it('runs strategies in order (email first by default) and honours an override', async () => {
      const user = await pushUser({ pushEnabled: true, pushTypes: ['announcement'] });
      await subscribe(user);
      const queuedEmail = async (id: string) =>
        rowsOf(
          await app.ctx.database.db.execute(
            sql`select 1 from email_outbox where dedupe_key = ${`notification:${id}`}`,
          ),
        ).length;
      // announcement is in the default emailTypes: email wins, push is not tried.
      const byEmail = await send(user, { type: 'announcement' });
      expect(await queuedEmail(byEmail.id)).toBe(1);
      expect(await deliveries(byEmail.id)).toEqual([]);
      const res = await call('POST', '/admin/notifications/send', admin.cookie, {
        target: { scope: 'user', identifier: user.id },
        notification: {
          type: 'announcement',
          title: 'push first',
          content: 'x',
          deliveryOptions: { strategies: ['push', 'email'] },
        },
      });
      expect(res.statusCode).toBe(200);
      const list = await call('GET', '/notification/list?limit=1', user.cookie);
      const byPush = (list.json() as { notifications: Array<{ id: string }> }).notifications[0] as {
        id: string;
      };
      expect(await queuedEmail(byPush.id)).toBe(0);
      await waitForStatus(byPush.id, 'sent');
    });

    it('410 removes the subscription and its queued messages', async () => {
      const user = await pushUser();
      const { browser, id } = await subscribe(user);
      push.program(browser.token, [{ status: 410 }]);
      const n = await send(user, {});
      const [row] = await waitForStatus(n.id, 'gone');
      expect(row?.statusCode).toBe(410);
      const list = await call('GET', '/notification/push/subscriptions', user.cookie);
      expect(
        (list.json() as { subscriptions: Array<{ id: string }> }).subscriptions.map((s) => s.id),
      ).not.toContain(id);
      await hooks.until((all) =>
        all.some((r) => r.body.includes('"push.failed"') && r.body.includes(n.id) && r.body.includes('gone')),
      );
      // The next notification finds no browser.
      expect(await deliveries((await send(user, {})).id)).toEqual([]);
    });

    it('429 with Retry-After is retried once, after at least that delay', async () => {
      const user = await pushUser();
      const { browser } = await subscribe(user);
      push.program(browser.token, [{ status: 429, headers: { 'retry-after': '1' } }]);
      const n = await send(user, {});
      const [row] = await waitForStatus(n.id, 'sent');
      expect(row?.attempts).toBe(2);
      const seen = push.requests.filter((m) => m.token === browser.token);
      expect(seen.map((m) => m.status)).toEqual([429, 201]);
      expect((seen[1]?.at ?? 0) - (seen[0]?.at ?? 0)).toBeGreaterThanOrEqual(950);
    });

    it('500 is retried with backoff; another 4xx is not retried', async () => {
      const user = await pushUser();
      const { browser } = await subscribe(user);
      push.program(browser.token, [{ status: 500 }, { status: 503 }]);
      const n = await send(user, {});
      const [row] = await waitForStatus(n.id, 'sent');
      expect(row?.attempts).toBe(3);
      expect(push.requests.filter((m) => m.token === browser.token).map((m) => m.status)).toEqual([
        500, 503, 201,
      ]);

      const other = await pushUser();
      const sub = await subscribe(other);
      push.program(sub.browser.token, [{ status: 400 }]);
      const bad = await send(other, {});
      const [failed] = await waitForStatus(bad.id, 'failed');
      expect(failed?.attempts).toBe(1);
      expect(failed?.statusCode).toBe(400);
      expect(push.requests.filter((m) => m.token === sub.browser.token)).toHaveLength(1);
      // Not removed: only 404/410 mean the subscription is gone.
      const list = await call('GET', '/notification/push/subscriptions', other.cookie);
      expect((list.json() as { subscriptions: unknown[] }).subscriptions).toHaveLength(1);
    });

    it('a slow push service does not hold up another one', async () => {
      const user = await pushUser();
      const slow = await subscribe(user, push);
      const slow2 = await subscribe(user, push);
      const fast = await subscribe(user, push2);
      // Both per-service slots of the slow service are held for 3 s each.
      push.program(slow.browser.token, [{ status: 201, delayMs: 3_000 }]);
      push.program(slow2.browser.token, [{ status: 201, delayMs: 3_000 }]);
      const n = await send(user, {});
      await push2.until(() => push2.accepted.some((m) => m.payload.id === n.id));
      // The fast service's message went through while the slow one still holds both requests.
      expect(push.accepted.filter((m) => m.payload.id === n.id)).toHaveLength(0);
      expect(push.received.filter((m) => m.payload.id === n.id)).toHaveLength(2);
      expect(fast.browser.token).toBeTruthy();
      await waitForStatus(n.id, 'sent');
    });

    it('a browser taken over by another user never shows what was queued for the previous one', async () => {
      const first = await pushUser();
      const second = await pushUser();
      const { browser } = await subscribe(first);
      // The first attempt is throttled for 2 s: the message stays queued for `first` meanwhile.
      push.program(browser.token, [{ status: 429, headers: { 'retry-after': '2' } }]);
      const n = await send(first, {});
      await push.until(() => push.requests.some((m) => m.token === browser.token));
      // `second` signs in on that browser and subscribes it: same endpoint, new owner.
      const moved = await call(
        'POST',
        '/notification/push/subscriptions',
        second.cookie,
        browser.subscription,
      );
      expect(moved.statusCode).toBe(200);
      const [row] = await waitForStatus(n.id, 'cancelled');
      expect(row?.error).toBe('subscription removed');
      expect(push.requests.filter((m) => m.token === browser.token).map((m) => m.status)).toEqual([429]);
    });

    it('a broadcast batch queues every user’s browsers in one statement, not one per user', async () => {
      const users = await Promise.all([0, 1, 2, 3].map(() => pushUser()));
      for (const u of users) await subscribe(u);
      const two = await subscribe(users[0] as TestUser);
      const statements: string[] = [];
      const db = app.ctx.database.db;
      const original = db.execute.bind(db);
      // Observation only (the statement still runs): how many push queue inserts one batch costs.
      db.execute = ((q: Parameters<typeof original>[0]) => {
        const text = JSON.stringify(q);
        if (text.includes('insert into push_delivery')) statements.push(text);
        return original(q);
      }) as typeof db.execute;
      try {
        await app.notifications.createForUsers(
          users.map((u) => u.id),
          { type: 'message', title: 'to all four', content: 'x' },
        );
      } finally {
        db.execute = original;
      }
      expect(statements).toHaveLength(1);
      // Five browsers (one user has two), each sent its message.
      await push.until(() => push.accepted.filter((m) => m.payload.title === 'to all four').length === 5);
      expect(
        push.accepted.some((m) => m.token === two.browser.token && m.payload.title === 'to all four'),
      ).toBe(true);
    });

    it('reports queue depth, sends and failures to Prometheus', async () => {
      const res = await app.inject({
        method: 'GET',
        url: '/metrics?format=prometheus',
        headers: { cookie: admin.cookie },
      });
      expect(res.statusCode).toBe(200);
      expect(res.body).toMatch(/^herald_push_queue_depth\{[^}]*\} \d+/m);
      const sends = /^herald_push_sends_total\{[^}]*\} (\d+)/m.exec(res.body);
      expect(Number(sends?.[1])).toBeGreaterThan(0);
      const failures = /^herald_push_failures_total\{[^}]*\} (\d+)/m.exec(res.body);
      expect(Number(failures?.[1])).toBeGreaterThan(0);
      const json = await app.inject({ method: 'GET', url: '/metrics', headers: { cookie: admin.cookie } });
      expect((json.json() as { push: { sent: number } }).push.sent).toBeGreaterThan(0);
    });
  });
});
