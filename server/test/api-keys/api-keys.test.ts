// API keys end to end over two app instances sharing PostgreSQL and Redis: lifecycle (create → send → scope 403
// → revoke on A → 401 on B → expired 401), storage (hash only, key never listed), malformed headers, no session
// from a key, the per-key rate limit shared across instances, access to the admin routes and body validation;
// then, with real server processes and a private redis-server: the batched last use written on SIGTERM, and
// the per-instance fallback limit while the store is down.
import { eq, sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { apiKey } from '../../src/infra/schema/index.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { startRedisServer, type TestRedis } from '../helpers/redis-server.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

interface CreatedKey {
  id: string;
  name: string;
  scopes: string[];
  prefix: string;
  createdBy: string | null;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  key: string;
}

const sendBody = (identifier: string, title = 'From a backend') => ({
  target: { scope: 'user', identifier },
  notification: { type: 'announcement', title, content: 'Sent with an API key' },
});

describe('API keys', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let admin: TestUser;
  let user: TestUser;

  beforeAll(async () => {
    env = await createTestEnv({ API_KEY_LAST_USED_FLUSH_MS: '100' });
    [a, b] = await Promise.all([env.app(), env.app()]);
    [admin, user] = await Promise.all([createAdmin(a, env.smtp), createVerifiedUser(a, env.smtp)]);
  });
  afterAll(async () => {
    await env?.close();
  });

  const create = async (app: App, payload: Record<string, unknown>, cookie = admin.cookie) =>
    app.inject({ method: 'POST', url: '/admin/api-keys', headers: jsonHeaders(cookie), payload });
  const createKey = async (payload: Record<string, unknown>, app = a): Promise<CreatedKey> => {
    const res = await create(app, payload);
    expect(res.statusCode).toBe(201);
    return res.json() as CreatedKey;
  };
  const send = (app: App, authorization: string, payload: unknown = sendBody(user.id)) =>
    app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: { 'content-type': 'application/json', authorization },
      payload: payload as Record<string, unknown>,
    });
  const metrics = (app: App, authorization: string) =>
    app.inject({ method: 'GET', url: '/metrics', headers: { authorization } });

  it('creates a key, uses it on send, refuses /metrics without the scope, revokes it everywhere, expires', async () => {
    const created = await createKey({ name: 'billing-service', scopes: ['notifications:send'] });
    expect(created).toMatchObject({
      name: 'billing-service',
      scopes: ['notifications:send'],
      expiresAt: null,
      lastUsedAt: null,
    });
    expect(created.key).toMatch(/^hk_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(created.key.slice(3), 'base64url')).toHaveLength(32);
    expect(created.key.startsWith(created.prefix)).toBe(true);
    expect(Date.parse(created.createdAt)).toBeGreaterThan(0);

    // Used on the other instance than the one that created it.
    const sent = await send(b, `Bearer ${created.key}`, sendBody(user.email, 'keyed send'));
    expect(sent.statusCode).toBe(200);
    expect(sent.json()).toMatchObject({ targetCount: 1, createdCount: 1, skippedCount: 0, failures: [] });

    const noScope = await metrics(b, `Bearer ${created.key}`);
    expect(noScope.statusCode).toBe(403);
    expect(noScope.json()).toMatchObject({ code: 'FORBIDDEN' });

    // lastUsedAt is flushed in the background (every 100 ms here).
    await expect
      .poll(async () => {
        const list = await a.inject({
          method: 'GET',
          url: '/admin/api-keys',
          headers: { cookie: admin.cookie },
        });
        return (list.json() as { apiKeys: CreatedKey[] }).apiKeys.find((k) => k.id === created.id)
          ?.lastUsedAt;
      })
      .not.toBeNull();

    const del = await a.inject({
      method: 'DELETE',
      url: `/admin/api-keys/${created.id}`,
      headers: { origin: jsonHeaders().origin as string, cookie: admin.cookie },
    });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ id: created.id });
    const after = await send(b, `Bearer ${created.key}`);
    expect(after.statusCode).toBe(401);
    expect(after.json()).toMatchObject({ code: 'UNAUTHORIZED' });

    const again = await a.inject({
      method: 'DELETE',
      url: `/admin/api-keys/${created.id}`,
      headers: { cookie: admin.cookie },
    });
    expect(again.statusCode).toBe(404);
    expect(again.json()).toMatchObject({ code: 'NOT_FOUND' });
    const bogus = await a.inject({
      method: 'DELETE',
      url: '/admin/api-keys/nope',
      headers: { cookie: admin.cookie },
    });
    expect(bogus.statusCode).toBe(404);

    // Expiry: a key created with a future expiry, then moved into the past in the database.
    const expiring = await createKey({
      name: 'temp',
      scopes: ['notifications:send', 'metrics:read'],
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(expiring.expiresAt).not.toBeNull();
    expect((await metrics(b, `Bearer ${expiring.key}`)).statusCode).toBe(200);
    await a.ctx.database.db
      .update(apiKey)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(apiKey.id, expiring.id));
    for (const app of [a, b]) {
      const res = await send(app, `Bearer ${expiring.key}`);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ code: 'UNAUTHORIZED' });
      expect((await metrics(app, `Bearer ${expiring.key}`)).statusCode).toBe(401);
    }
  });

  // Issue 22 (7), CONTRACT §9: keys show who made them and stop working, on every instance, once that
  // administrator is banned, demoted or deleted, before the request that did it returns.
  it.each([
    ['banned', (id: string) => ({ url: '/auth/admin/ban-user', payload: { userId: id } })],
    ['demoted', (id: string) => ({ url: '/auth/admin/set-role', payload: { userId: id, role: 'user' } })],
    ['deleted', (id: string) => ({ url: '/auth/admin/remove-user', payload: { userId: id } })],
  ])('a key stops working on the other instance once its creator is %s', async (_, action) => {
    const creator = await createAdmin(a, env.smtp);
    const res = await create(
      a,
      { name: 'made by a soon-gone admin', scopes: ['notifications:send'] },
      creator.cookie,
    );
    expect(res.statusCode).toBe(201);
    const created = res.json() as CreatedKey;
    expect(created.createdBy).toBe(creator.id);
    const listed = (
      await b.inject({ method: 'GET', url: '/admin/api-keys', headers: jsonHeaders(admin.cookie) })
    ).json() as { apiKeys: CreatedKey[] };
    expect(listed.apiKeys.find((k) => k.id === created.id)?.createdBy).toBe(creator.id);
    expect((await send(b, `Bearer ${created.key}`)).statusCode).toBe(200);
    // Another admin acts on instance A; the very next use on instance B is refused.
    const { url, payload } = action(creator.id);
    const acted = await a.inject({ method: 'POST', url, headers: jsonHeaders(admin.cookie), payload });
    expect(acted.statusCode, acted.body).toBe(200);
    const refused = await send(b, `Bearer ${created.key}`);
    expect(refused.statusCode, refused.body).toBe(401);
    expect(refused.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    expect((await metrics(a, `Bearer ${created.key}`)).statusCode).toBe(401);
  });

  it('serves /metrics to a metrics:read key and refuses it on send', async () => {
    const created = await createKey({ name: 'scraper', scopes: ['metrics:read'] });
    const res = await metrics(a, `Bearer ${created.key}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toHaveProperty('pubsub');
    const prom = await a.inject({
      method: 'GET',
      url: '/metrics?format=prometheus',
      headers: { authorization: `Bearer ${created.key}` },
    });
    expect(prom.statusCode).toBe(200);
    const denied = await send(a, `Bearer ${created.key}`);
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toMatchObject({ code: 'FORBIDDEN' });
    // An unknown key of the right shape → 401 on both routes.
    const unknown = `hk_${'A'.repeat(43)}`;
    expect((await metrics(a, `Bearer ${unknown}`)).statusCode).toBe(401);
    expect((await send(a, `Bearer ${unknown}`)).statusCode).toBe(401);
  });

  it('stores only a hash and never lists the key', async () => {
    const created = await createKey({ name: 'hash-check', scopes: ['notifications:send'] });
    const rows = rowsOf<Record<string, unknown>>(
      await a.ctx.database.db.execute(sql`select * from api_key where id = ${created.id}`),
    );
    expect(rows).toHaveLength(1);
    const stored = JSON.stringify(rows[0]);
    expect(stored).not.toContain(created.key);
    expect(stored).not.toContain(created.key.slice(3));
    expect(rows[0]?.key_hash).toMatch(/^[0-9a-f]{64}$/);

    const list = await b.inject({ method: 'GET', url: '/admin/api-keys', headers: { cookie: admin.cookie } });
    expect(list.statusCode).toBe(200);
    const { apiKeys } = list.json() as { apiKeys: Array<Record<string, unknown>> };
    const entry = apiKeys.find((k) => k.id === created.id);
    expect(entry).toBeDefined();
    expect(Object.keys(entry ?? {}).sort()).toEqual(
      ['createdAt', 'createdBy', 'expiresAt', 'id', 'lastUsedAt', 'name', 'prefix', 'scopes'].sort(),
    );
    expect(list.body).not.toContain(created.key);
    expect(list.body).not.toContain(String(rows[0]?.key_hash));
  });

  it.each([
    ['no token', 'Bearer'],
    ['an empty bearer', 'Bearer '],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['a token without the prefix', `Bearer ${'x'.repeat(46)}`],
    ['a truncated key', 'Bearer hk_abc'],
    ['two tokens', `Bearer hk_${'A'.repeat(43)} hk_${'B'.repeat(43)}`],
    ['junk', '\u00ff\u00fe'],
    ['a very long token', `Bearer hk_${'A'.repeat(5000)}`],
  ])(
    'answers 401, never 500, to a malformed Authorization header on send: %s',
    async (_name, authorization) => {
      const res = await send(a, authorization);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    },
  );

  it('answers 401 to a malformed hk_ bearer on /metrics', async () => {
    const res = await metrics(a, 'Bearer hk_not-a-real-key');
    expect(res.statusCode).toBe(401);
  });

  it('never opens a session: a key on /auth/get-session gets none', async () => {
    const created = await createKey({ name: 'no-session', scopes: ['notifications:send', 'metrics:read'] });
    const res = await a.inject({
      method: 'GET',
      url: '/auth/get-session',
      headers: { authorization: `Bearer ${created.key}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toBeNull();
    expect(res.headers['set-cookie']).toBeUndefined();
    // Nor does it reach session routes of Herald's own.
    const own = await a.inject({
      method: 'GET',
      url: '/notification/list',
      headers: { authorization: `Bearer ${created.key}` },
    });
    expect(own.statusCode).toBe(401);
    // Nor manage keys.
    const manage = await a.inject({
      method: 'GET',
      url: '/admin/api-keys',
      headers: { authorization: `Bearer ${created.key}` },
    });
    expect(manage.statusCode).toBe(401);
  });

  it('shares the per-key rate limit across instances (429 with Retry-After)', async () => {
    const limited = { API_KEY_RATE_LIMIT_MAX: '3', API_KEY_RATE_LIMIT_WINDOW_S: '60' };
    const [c, d] = await Promise.all([env.app(limited), env.app(limited)]);
    const created = await createKey({ name: 'limited', scopes: ['metrics:read'] });
    const statuses: number[] = [];
    for (const app of [c, d, c]) statuses.push((await metrics(app, `Bearer ${created.key}`)).statusCode);
    expect(statuses).toEqual([200, 200, 200]);
    const over = await metrics(d, `Bearer ${created.key}`);
    expect(over.statusCode).toBe(429);
    expect(over.json()).toMatchObject({ code: 'RATE_LIMITED' });
    const retryAfter = Number(over.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect((await metrics(c, `Bearer ${created.key}`)).statusCode).toBe(429);
    // Another key has its own budget.
    const other = await createKey({ name: 'other', scopes: ['metrics:read'] });
    expect((await metrics(c, `Bearer ${other.key}`)).statusCode).toBe(200);
  });

  it('lets only admins manage keys (401 without a session, 403 for a non-admin)', async () => {
    const anon = await a.inject({
      method: 'POST',
      url: '/admin/api-keys',
      headers: { 'content-type': 'application/json' },
      payload: { name: 'x', scopes: ['metrics:read'] },
    });
    expect(anon.statusCode).toBe(401);
    expect(anon.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    for (const res of [
      await create(a, { name: 'x', scopes: ['metrics:read'] }, user.cookie),
      await a.inject({ method: 'GET', url: '/admin/api-keys', headers: { cookie: user.cookie } }),
      await a.inject({
        method: 'DELETE',
        url: '/admin/api-keys/00000000-0000-4000-8000-000000000000',
        headers: { cookie: user.cookie },
      }),
    ]) {
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ code: 'FORBIDDEN' });
    }
    expect((await a.inject({ method: 'GET', url: '/admin/api-keys' })).statusCode).toBe(401);
  });

  it.each([
    ['an unknown scope', { name: 'x', scopes: ['chat:write'] }],
    ['no scopes', { name: 'x', scopes: [] }],
    ['an unknown key', { name: 'x', scopes: ['metrics:read'], admin: true }],
    ['a name too long', { name: 'x'.repeat(101), scopes: ['metrics:read'] }],
    ['an empty name', { name: '  ', scopes: ['metrics:read'] }],
    ['a missing name', { scopes: ['metrics:read'] }],
    // Issue 22 (8): listed to every administrator, so one line and nothing invisible, like a user's name.
    ['a name with a newline', { name: 'billing\nservice', scopes: ['metrics:read'] }],
    ['a name with a right-to-left override', { name: 'billing\u202eecivres', scopes: ['metrics:read'] }],
    ['a name with a zero-width space', { name: 'billing\u200b', scopes: ['metrics:read'] }],
    ['a bad expiry', { name: 'x', scopes: ['metrics:read'], expiresAt: 'tomorrow' }],
    ['a past expiry', { name: 'x', scopes: ['metrics:read'], expiresAt: '2020-01-01T00:00:00Z' }],
  ])('refuses %s with 400 VALIDATION_ERROR', async (_name, payload) => {
    const res = await create(a, payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});

describe('API keys: last use flushed on graceful shutdown', () => {
  let cluster: TestCluster;
  afterAll(async () => {
    await cluster?.close();
  });

  it('writes the batched lastUsedAt when the instance gets SIGTERM', async () => {
    // Far beyond the test: only the shutdown flush can write the last use. One process: the database is where
    // every other instance reads the time from (GET /admin/api-keys lists the stored value).
    cluster = await startCluster({ instances: 1, env: { API_KEY_LAST_USED_FLUSH_MS: '600000' } });
    const admin = await createVerifiedUserOn(cluster, 0);
    const db = new pg.Client({ connectionString: cluster.db.url });
    await db.connect();
    try {
      await db.query(`update "user" set role = 'admin' where id = $1`, [admin.id]);
      const signIn = await fetch(`${cluster.url(0)}/auth/sign-in/email`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN },
        body: JSON.stringify({ email: admin.email, password: admin.password }),
      });
      const cookie = signIn.headers
        .getSetCookie()
        .map((c) => c.split(';')[0] ?? '')
        .filter((c) => c && !c.endsWith('='))
        .join('; ');
      const headers = { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie };
      const created = await fetch(`${cluster.url(0)}/admin/api-keys`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'flushed', scopes: ['metrics:read'] }),
      });
      expect(created.status).toBe(201);
      const key = (await created.json()) as CreatedKey;
      const used = await fetch(`${cluster.url(0)}/metrics`, {
        headers: { authorization: `Bearer ${key.key}` },
      });
      expect(used.status).toBe(200);
      const stored = async () =>
        (
          await db.query<{ last_used_at: Date | null }>('select last_used_at from api_key where id = $1', [
            key.id,
          ])
        ).rows[0]?.last_used_at ?? null;
      expect(await stored()).toBeNull();

      const exit = await cluster.kill(0, 'SIGTERM');
      expect(exit.code).toBe(0);
      const at = await stored();
      expect(at).not.toBeNull();
      // The time of the use (recorded in memory at the request), not of the shutdown write.
      expect(at?.getTime()).toBeGreaterThanOrEqual(Date.parse(key.createdAt));
    } finally {
      await db.end();
    }
  });
});

describe('API keys: rate limit while the store is down', () => {
  let redis: TestRedis;
  let env: TestEnv;
  afterAll(async () => {
    await env?.close();
    await redis?.close();
  });

  it('falls back to a per-instance limit (still 429 after the limit, never unlimited)', async () => {
    redis = await startRedisServer();
    env = await createTestEnv({
      CACHE_URL: redis.url,
      API_KEY_RATE_LIMIT_MAX: '3',
      API_KEY_RATE_LIMIT_WINDOW_S: '60',
      CACHE_COMMAND_TIMEOUT_MS: '200',
    });
    const app = await env.app();
    const admin = await createAdmin(app, env.smtp);
    const res = await app.inject({
      method: 'POST',
      url: '/admin/api-keys',
      headers: jsonHeaders(admin.cookie),
      payload: { name: 'offline', scopes: ['notifications:send'] },
    });
    expect(res.statusCode).toBe(201);
    const { key } = res.json() as CreatedKey;
    await redis.stop();
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const sent = await app.inject({
        method: 'POST',
        url: '/admin/notifications/send',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        payload: sendBody(admin.id, `offline ${i}`),
      });
      statuses.push(sent.statusCode);
    }
    // The sends themselves work without the store (the database holds the truth); the fourth is over the limit.
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
  });
});
