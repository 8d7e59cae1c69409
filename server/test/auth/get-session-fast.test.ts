// The get-session fast path (auth/session-read.ts, docs/architecture.md "The get-session fast path"): the same
// request answered by the fast path and by better-auth gives the same body (byte for byte), the same headers and
// an equivalent snapshot cookie that better-auth itself accepts; everything it cannot answer exactly falls through.
import { createHmac } from 'node:crypto';
import { getCookieCache } from 'better-auth/cookies';
import { eq } from 'drizzle-orm';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import * as schema from '../../src/infra/schema/index.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { TEST_AUTH_SECRET } from '../helpers/env.js';
import { type ServerProcess, spawnServer } from '../helpers/process.js';
import { freePort } from '../helpers/redis-server.js';
import { cookieFrom, createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const DATA = 'better-auth.session_data';
/** Headers that differ per response whoever answers. */
const PER_RESPONSE = new Set(['date', 'x-request-id', 'set-cookie']);

function snapshotOf(res: LightMyRequestResponse): string | undefined {
  return ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith(`${DATA}=`));
}

interface Snapshot {
  session: {
    session: Record<string, unknown>;
    user: Record<string, unknown>;
    updatedAt: number;
    version: string;
  };
  expiresAt: number;
  signature: string;
}

function decodeSnapshot(setCookie: string): { value: string; attributes: string; payload: Snapshot } {
  const first = setCookie.indexOf(';');
  const value = setCookie.slice(DATA.length + 1, first);
  const payload = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Snapshot;
  return { value, attributes: setCookie.slice(first), payload };
}

const sessionToken = (cookie: string) => /better-auth\.session_token=([^;]+)/.exec(cookie)?.[0] ?? '';

describe('get-session fast path', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  beforeAll(async () => {
    env = await createTestEnv();
    a = await env.app();
    b = await env.app();
  });
  afterAll(() => env.close());

  /** The request a client sends (fast path), and the same request forced through better-auth by a query. */
  async function both(app: App, cookie: string) {
    const stats = { ...app.ctx.sessionRead.stats };
    const fast = await app.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie } });
    const fastServed = app.ctx.sessionRead.stats.fast - stats.fast;
    const slow = await app.inject({
      method: 'GET',
      url: '/auth/get-session?disableCookieCache=true',
      headers: { cookie },
    });
    return { fast, slow, fastServed };
  }

  /** Deep equality of the two answers, and of both with a direct auth.api.getSession call. */
  async function expectSameAnswer(app: App, cookie: string, expectFast: boolean) {
    const { fast, slow, fastServed } = await both(app, cookie);
    expect(fastServed).toBe(expectFast ? 1 : 0);
    expect(fast.statusCode).toBe(slow.statusCode);
    expect(fast.body).toBe(slow.body);
    const direct = await app.ctx.auth.api.getSession({
      headers: new Headers({ cookie: sessionToken(cookie) }),
      query: { disableCookieCache: true },
    });
    expect(fast.json()).toEqual(JSON.parse(JSON.stringify(direct)));
    const names = (r: LightMyRequestResponse) => Object.keys(r.headers).filter((n) => !PER_RESPONSE.has(n));
    expect(names(fast)).toEqual(names(slow));
    for (const name of names(fast)) expect(fast.headers[name], name).toEqual(slow.headers[name]);
    const fastSnap = snapshotOf(fast);
    const slowSnap = snapshotOf(slow);
    expect(Boolean(fastSnap)).toBe(Boolean(slowSnap));
    if (fastSnap?.startsWith(`${DATA}=;`) || slowSnap?.startsWith(`${DATA}=;`)) {
      // Expiring the snapshot (a session that is gone): nothing time-dependent in it.
      expect(fastSnap).toBe(slowSnap);
      expect(fast.headers['set-cookie']).toEqual(slow.headers['set-cookie']);
    } else if (fastSnap && slowSnap) {
      const f = decodeSnapshot(fastSnap);
      const s = decodeSnapshot(slowSnap);
      // Same attributes (Max-Age, Path, HttpOnly, SameSite, …) and the same content; only the issue time differs.
      expect(f.attributes).toBe(s.attributes);
      expect(f.payload.session.session).toEqual(s.payload.session.session);
      expect(f.payload.session.user).toEqual(s.payload.session.user);
      expect(f.payload.session.version).toBe(s.payload.session.version);
      expect(f.payload.expiresAt - f.payload.session.updatedAt).toBe(
        s.payload.expiresAt - s.payload.session.updatedAt,
      );
      expect(Object.keys(f.payload)).toEqual(Object.keys(s.payload));
      expect(Object.keys(f.payload.session)).toEqual(Object.keys(s.payload.session));
      const signed = JSON.stringify({ ...f.payload.session, expiresAt: f.payload.expiresAt });
      expect(f.payload.signature).toBe(
        createHmac('sha256', TEST_AUTH_SECRET).update(signed).digest('base64url'),
      );
      // better-auth's own reader accepts the fast path's cookie.
      const read = await getCookieCache(new Headers({ cookie: `${DATA}=${f.value}` }), {
        secret: TEST_AUTH_SECRET,
        isSecure: false,
      });
      expect(read?.user.id).toBe(s.payload.session.user.id);
    }
    return fast;
  }

  it('a normal user (non-ASCII name): same body, headers and snapshot as better-auth', async () => {
    const u = await createVerifiedUser(a, env.smtp, { name: 'Zoë 🦊 Ünïcode' });
    const fast = await expectSameAnswer(b, u.cookie, true);
    expect(fast.json().user.name).toBe('Zoë 🦊 Ünïcode');
    expect(snapshotOf(fast)).toMatch(/Max-Age=900; Path=\/; HttpOnly; SameSite=Lax$/);
    // Polling: every call is answered here and re-issues the snapshot, as better-auth does.
    const before = b.ctx.sessionRead.stats.fast;
    for (let i = 0; i < 5; i++) {
      const res = await b.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: u.cookie } });
      expect(res.json().user.id).toBe(u.id);
      expect(snapshotOf(res)).toBeDefined();
    }
    expect(b.ctx.sessionRead.stats.fast - before).toBe(5);
  });

  it('an admin and a user with a username', async () => {
    const admin = await createAdmin(a, env.smtp);
    expect((await expectSameAnswer(b, admin.cookie, true)).json().user.role).toBe('admin');
    const named = await createVerifiedUser(a, env.smtp, { username: `fast_${Date.now() % 1e6}` });
    const fast = await expectSameAnswer(b, named.cookie, true);
    expect(fast.json().user.username).toBe(named.username);
    expect(fast.json().user.displayUsername).toBe(named.username);
  });

  it('after update-user (own name) and set-role (by an admin, on another instance): never a stale answer', async () => {
    const u = await createVerifiedUser(a, env.smtp, { name: 'Before' });
    await expectSameAnswer(b, u.cookie, true);
    const update = await a.inject({
      method: 'POST',
      url: '/auth/update-user',
      headers: jsonHeaders(u.cookie),
      payload: { name: 'After' },
    });
    expect(update.statusCode, update.body).toBe(200);
    // better-auth rewrites the stored record of every session of the user: a new text, so a new rendering.
    expect((await expectSameAnswer(b, u.cookie, true)).json().user.name).toBe('After');

    const boss = await createAdmin(a, env.smtp);
    const promote = await a.inject({
      method: 'POST',
      url: '/auth/admin/set-role',
      headers: jsonHeaders(boss.cookie),
      payload: { userId: u.id, role: 'admin' },
    });
    expect(promote.statusCode, promote.body).toBe(200);
    expect((await expectSameAnswer(b, u.cookie, true)).json().user.role).toBe('admin');
  });

  it('after sign-out, revocation on another instance and ban: null at once, as better-auth says', async () => {
    const boss = await createAdmin(a, env.smtp);
    const users: TestUser[] = [];
    for (let i = 0; i < 3; i++) users.push(await createVerifiedUser(a, env.smtp));
    const [out, revoked, banned] = users as [TestUser, TestUser, TestUser];
    for (const u of users) await expectSameAnswer(b, u.cookie, true);

    const signOut = await a.inject({
      method: 'POST',
      url: '/auth/sign-out',
      headers: jsonHeaders(out.cookie),
      payload: {},
    });
    expect(signOut.statusCode).toBe(200);
    expect((await expectSameAnswer(b, out.cookie, false)).json()).toBeNull();

    const revoke = await a.inject({
      method: 'POST',
      url: '/auth/admin/revoke-user-sessions',
      headers: jsonHeaders(boss.cookie),
      payload: { userId: revoked.id },
    });
    expect(revoke.statusCode, revoke.body).toBe(200);
    expect((await expectSameAnswer(b, revoked.cookie, false)).json()).toBeNull();

    const ban = await a.inject({
      method: 'POST',
      url: '/auth/admin/ban-user',
      headers: jsonHeaders(boss.cookie),
      payload: { userId: banned.id },
    });
    expect(ban.statusCode, ban.body).toBe(200);
    expect((await expectSameAnswer(b, banned.cookie, false)).json()).toBeNull();
  });

  it('a ban or a "revoked before" mark the store record does not show yet: left to better-auth', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    await expectSameAnswer(b, u.cookie, true);
    const token = (await b.ctx.sessions.fromHeaders({ cookie: u.cookie }))?.session.token ?? '';
    const key = `auth:${token}`;
    const original = (await b.ctx.store.get(key)) ?? '';

    // better-auth refuses sessions created before the user's revoked-sessions-before mark.
    await b.ctx.store.set(`auth:revoked-sessions-before-${u.id}`, String(Date.now() + 1000), 60_000);
    expect((await expectSameAnswer(b, u.cookie, false)).json()).toBeNull();
    await b.ctx.store.del(`auth:revoked-sessions-before-${u.id}`);
    await expectSameAnswer(b, u.cookie, true);

    // A record that says banned: the guard refuses it, so better-auth answers (whatever it says).
    const stored = JSON.parse(original);
    stored.user.banned = true;
    await b.ctx.store.set(key, JSON.stringify(stored), 60_000);
    await expectSameAnswer(b, u.cookie, false);
    await b.ctx.store.set(key, original, 60_000);
    await expectSameAnswer(b, u.cookie, true);
  });

  it('the once-a-day session refresh is left to better-auth, which re-issues the token cookie', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    const ctx = await b.ctx.sessions.fromHeaders({ cookie: u.cookie });
    const token = ctx?.session.token ?? '';
    const key = `auth:${token}`;
    const stored = JSON.parse((await b.ctx.store.get(key)) ?? '{}');
    const aged = new Date(Date.now() + 5 * 24 * 3600 * 1000);
    stored.session.expiresAt = aged.toISOString();
    await b.ctx.store.set(key, JSON.stringify(stored), 5 * 24 * 3600 * 1000);
    await a.ctx.database.db
      .update(schema.session)
      .set({ expiresAt: aged })
      .where(eq(schema.session.token, token));

    const before = { ...b.ctx.sessionRead.stats };
    const res = await b.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: u.cookie } });
    expect(b.ctx.sessionRead.stats.fallthrough - before.fallthrough).toBe(1);
    expect(b.ctx.sessionRead.stats.fast).toBe(before.fast);
    expect(String(res.headers['set-cookie'])).toContain('better-auth.session_token=');
    expect(snapshotOf(res)).toMatch(/Max-Age=900/);
    expect(new Date(res.json().session.expiresAt).getTime()).toBeGreaterThan(
      Date.now() + 6.9 * 24 * 3600 * 1000,
    );
    // Refreshed: the next call is the fast path's again, with the new expiry.
    const next = await expectSameAnswer(b, u.cookie, true);
    expect(next.json().session.expiresAt).toBe(res.json().session.expiresAt);
  });

  it('falls through on a query string, no or a bad cookie, "remember me" off and an untrusted store', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    const stats = b.ctx.sessionRead.stats;
    const count = async (url: string, cookie?: string) => {
      const before = { ...stats };
      const res = await b.inject({ method: 'GET', url, headers: cookie ? { cookie } : {} });
      return { res, fast: stats.fast - before.fast };
    };
    expect((await count('/auth/get-session?disableRefresh=true', u.cookie)).fast).toBe(0);
    const none = await count('/auth/get-session');
    expect(none.fast).toBe(0);
    expect(none.res.json()).toBeNull();
    const tampered = u.cookie.replace(/session_token=([^;.]+)/, 'session_token=AAAA$1');
    const bad = await count('/auth/get-session', tampered);
    expect(bad.fast).toBe(0);
    expect(bad.res.json()).toBeNull();

    const signIn = await a.inject({
      method: 'POST',
      url: '/auth/sign-in/email',
      headers: jsonHeaders(),
      payload: { email: u.email, password: u.password, rememberMe: false },
    });
    const shortLived = cookieFrom(signIn.headers['set-cookie']);
    expect(shortLived).toContain('dont_remember');
    const dont = await count('/auth/get-session', shortLived);
    expect(dont.fast).toBe(0);
    expect(dont.res.json().user.id).toBe(u.id);

    // After a store failure (until the repairs are applied) PostgreSQL is the truth: better-auth answers.
    b.ctx.revocation.storeFailed();
    const untrusted = await count('/auth/get-session', u.cookie);
    expect(untrusted.fast).toBe(0);
    expect(untrusted.res.json().user.id).toBe(u.id);
    expect(await b.ctx.revocation.drain()).toBe(true);
    expect((await count('/auth/get-session', u.cookie)).fast).toBe(1);
  });
});

describe('get-session fast path across two server processes on one Redis', () => {
  let env: TestEnv;
  let a: App;
  const servers: ServerProcess[] = [];
  const urls: string[] = [];
  beforeAll(async () => {
    env = await createTestEnv();
    a = await env.app();
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const server = spawnServer({
        ...env.baseEnv,
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'info',
      });
      servers.push(server);
      urls.push(`http://127.0.0.1:${port}`);
    }
    await Promise.all(servers.map((s) => s.waitForLine(/Herald ready/)));
  }, 60_000);
  afterAll(async () => {
    for (const s of servers) {
      s.child.kill('SIGTERM');
      await s.exited;
    }
    await env.close();
  });

  const getSession = async (base: string, cookie: string) => {
    const res = await fetch(`${base}/auth/get-session`, { headers: { cookie } });
    return { status: res.status, body: (await res.json()) as { user: { id: string } } | null };
  };

  it('sign-out and revocation on one process are seen by the other on its very next get-session', async () => {
    const [p1, p2] = urls as [string, string];
    const boss = await createAdmin(a, env.smtp);
    const u = await createVerifiedUser(a, env.smtp);
    const v = await createVerifiedUser(a, env.smtp);
    // Warm the second process's caches for both sessions.
    for (let i = 0; i < 3; i++) {
      expect((await getSession(p2, u.cookie)).body?.user.id).toBe(u.id);
      expect((await getSession(p2, v.cookie)).body?.user.id).toBe(v.id);
    }
    const out = await fetch(`${p1}/auth/sign-out`, {
      method: 'POST',
      headers: { ...jsonHeaders(u.cookie), origin: TEST_ORIGIN },
      body: '{}',
    });
    expect(out.status).toBe(200);
    expect(await getSession(p2, u.cookie)).toEqual({ status: 200, body: null });

    const revoke = await fetch(`${p1}/auth/admin/revoke-user-sessions`, {
      method: 'POST',
      headers: jsonHeaders(boss.cookie),
      body: JSON.stringify({ userId: v.id }),
    });
    expect(revoke.status).toBe(200);
    expect(await getSession(p2, v.cookie)).toEqual({ status: 200, body: null });
  });
});
