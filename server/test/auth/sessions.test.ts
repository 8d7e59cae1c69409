// Session design (docs/architecture.md "Sessions"): hot-path verification with one store read and no database
// query, revocation visible on another instance by the very next request, disconnect events, and the database
// fallback when the store is unreachable.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { eq } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createDatabase, type Database, type Db } from '../../src/infra/db.js';
import * as schema from '../../src/infra/schema/index.js';
import { createStore, type Store } from '../../src/infra/store.js';
import type { UserDisconnect } from '../../src/realtime/types.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { tokenFrom } from '../helpers/smtp.js';
import {
  cookieFrom,
  createAdmin,
  createVerifiedUser,
  jsonHeaders,
  signIn,
  uniqueEmail,
} from '../helpers/users.js';

/** A database whose Drizzle instance counts every query it runs. */
async function countingDatabase(url: string) {
  const base = await createDatabase({ databaseUrl: url, dataDir: '/tmp/unused' });
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const counter = { queries: 0 };
  const db = drizzle(pool, {
    schema,
    casing: 'snake_case',
    // Only queries that could resolve a session count: background workers (outbox poll, revocation repair
    // drain, retention) run on their own timers and would make the count depend on timing. The push worker's
    // claim names "user" too (a banned user's queued messages are cancelled), so queue statements are left out.
    logger: {
      logQuery: (query: string) => {
        if (/"session"|"user"|"account"/.test(query) && !/push_delivery/.test(query)) counter.queries++;
      },
    },
  }) as unknown as Db;
  const database: Database = {
    db,
    kind: 'postgres',
    migrate: () => base.migrate(),
    ping: () => base.ping(),
    async close() {
      await pool.end();
      await base.close();
    },
  };
  return { database, counter };
}

/** A store that counts reads. */
function countingStore(store: Store) {
  const counter = { reads: 0 };
  const wrapped: Store = {
    ...store,
    get: (key) => {
      counter.reads++;
      return store.get(key);
    },
  };
  return { store: wrapped, counter };
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  return port;
}

async function startRedis(): Promise<{ url: string; proc: ChildProcess }> {
  const port = await freePort();
  const proc = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    proc.on('error', reject);
    proc.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('Ready to accept connections')) resolve();
    });
  });
  return { url: `redis://127.0.0.1:${port}`, proc };
}

describe('sessions', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let dbCounter: { queries: number };
  let storeCounter: { reads: number };
  beforeAll(async () => {
    env = await createTestEnv();
    a = await env.app();
    const counted = await countingDatabase(env.db.url);
    dbCounter = counted.counter;
    const store = countingStore(createStore({ url: env.baseEnv.CACHE_URL, prefix: env.prefix }));
    storeCounter = store.counter;
    b = await env.app({}, { overrides: { database: counted.database, store: store.store } });
  });
  afterAll(() => env.close());

  const listSessions = (app: App, cookie: string) =>
    app.inject({ method: 'GET', url: '/auth/list-sessions', headers: { cookie } });

  it('verifies a session with one store round trip (record and revoked-before mark) and no database query', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    const before = { queries: dbCounter.queries, reads: storeCounter.reads };
    for (let i = 0; i < 25; i++) {
      const ctx = await b.ctx.sessions.fromHeaders({ cookie: u.cookie });
      expect(ctx?.user.id).toBe(u.id);
    }
    expect(dbCounter.queries - before.queries).toBe(0);
    // Two keys a check: the session record and better-auth's "revoked before" mark of its user, read in the same
    // turn (one MGET on a single Redis, infra/store.ts).
    expect(storeCounter.reads - before.reads).toBe(50);
    // A forged or tampered cookie costs no lookup at all.
    const tampered = u.cookie.replace(/session_token=([^;.]+)/, 'session_token=AAAA$1');
    expect(await b.ctx.sessions.fromHeaders({ cookie: tampered })).toBeNull();
    expect(await b.ctx.sessions.fromHeaders({})).toBeNull();
    expect(storeCounter.reads - before.reads).toBe(50);
    expect(dbCounter.queries - before.queries).toBe(0);
  });

  it('get-session re-issues the 15-minute snapshot and slides the session at most once a day', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    const first = await b.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: u.cookie } });
    const snapshot = ([] as string[])
      .concat(first.headers['set-cookie'] ?? [])
      .find((c) => c.startsWith('better-auth.session_data='));
    expect(snapshot).toMatch(/Max-Age=900/);

    // Age the session by two days (as if signed in two days ago) in both the store and PostgreSQL.
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

    const before = dbCounter.queries;
    const refreshed = await b.inject({
      method: 'GET',
      url: '/auth/get-session',
      headers: { cookie: u.cookie },
    });
    expect(dbCounter.queries).toBeGreaterThan(before);
    const newExpiry = new Date(refreshed.json().session.expiresAt).getTime();
    expect(newExpiry).toBeGreaterThan(Date.now() + 6.9 * 24 * 3600 * 1000);
    expect(String(refreshed.headers['set-cookie'])).toContain('better-auth.session_token=');
    expect((await b.ctx.sessions.fromHeaders({ cookie: u.cookie }))?.session.expiresAt.getTime()).toBe(
      newExpiry,
    );

    const settled = dbCounter.queries;
    for (let i = 0; i < 5; i++) {
      const again = await b.inject({
        method: 'GET',
        url: '/auth/get-session',
        headers: { cookie: u.cookie },
      });
      expect(again.json().user.id).toBe(u.id);
    }
    expect(dbCounter.queries).toBe(settled);
  });

  it('sign-out on A is seen by B on the very next request', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    expect((await listSessions(b, u.cookie)).statusCode).toBe(200);
    const out = await a.inject({
      method: 'POST',
      url: '/auth/sign-out',
      headers: jsonHeaders(u.cookie),
      payload: {},
    });
    expect(out.statusCode).toBe(200);
    expect((await listSessions(b, u.cookie)).statusCode).toBe(401);
    expect(await b.ctx.sessions.fromHeaders({ cookie: u.cookie })).toBeNull();
    expect(
      (await b.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: u.cookie } })).json(),
    ).toBeNull();
  });

  it('admin revoke-user-session(s) and ban on A are seen by B at once; events are published', async () => {
    const admin = await createAdmin(a, env.smtp);
    const events: UserDisconnect[] = [];
    const off = a.ctx.realtime.onUserDisconnect((e) => events.push(e));
    try {
      const u = await createVerifiedUser(a, env.smtp);
      const second = await signIn(a, u.email, u.password);
      const one = (await b.ctx.sessions.fromHeaders({ cookie: u.cookie }))?.session;
      expect(one).toBeDefined();
      const revokeOne = await a.inject({
        method: 'POST',
        url: '/auth/admin/revoke-user-session',
        headers: jsonHeaders(admin.cookie),
        payload: { sessionToken: one?.token },
      });
      expect(revokeOne.statusCode, revokeOne.body).toBe(200);
      expect(await b.ctx.sessions.fromHeaders({ cookie: u.cookie })).toBeNull();
      expect((await listSessions(b, second)).statusCode).toBe(200);
      expect(events).toContainEqual({ userId: u.id, sessionId: one?.id, reason: 'session_revoked' });

      const revokeAll = await a.inject({
        method: 'POST',
        url: '/auth/admin/revoke-user-sessions',
        headers: jsonHeaders(admin.cookie),
        payload: { userId: u.id },
      });
      expect(revokeAll.statusCode, revokeAll.body).toBe(200);
      expect((await listSessions(b, second)).statusCode).toBe(401);

      const victim = await createVerifiedUser(a, env.smtp);
      expect((await listSessions(b, victim.cookie)).statusCode).toBe(200);
      const ban = await a.inject({
        method: 'POST',
        url: '/auth/admin/ban-user',
        headers: jsonHeaders(admin.cookie),
        payload: { userId: victim.id },
      });
      expect(ban.statusCode, ban.body).toBe(200);
      expect((await listSessions(b, victim.cookie)).statusCode).toBe(401);
      expect(await b.ctx.sessions.fromHeaders({ cookie: victim.cookie })).toBeNull();
      expect(events).toContainEqual({ userId: victim.id, reason: 'banned' });

      const signedOut = await createVerifiedUser(a, env.smtp);
      const sessionId = (await a.ctx.sessions.fromHeaders({ cookie: signedOut.cookie }))?.session.id;
      await a.inject({
        method: 'POST',
        url: '/auth/sign-out',
        headers: jsonHeaders(signedOut.cookie),
        payload: {},
      });
      expect(events).toContainEqual({ userId: signedOut.id, sessionId, reason: 'signed_out' });
    } finally {
      off();
    }
  });

  it('password reset on A revokes sessions seen by B and publishes password_reset', async () => {
    const events: UserDisconnect[] = [];
    const off = a.ctx.realtime.onUserDisconnect((e) => events.push(e));
    try {
      const u = await createVerifiedUser(a, env.smtp);
      await a.inject({
        method: 'POST',
        url: '/auth/forget-password',
        headers: jsonHeaders(),
        payload: { email: u.email },
      });
      const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject.includes('Reset'));
      const reset = await a.inject({
        method: 'POST',
        url: '/auth/reset-password',
        headers: jsonHeaders(),
        payload: { token: tokenFrom(mail, 'reset-password'), newPassword: 'fresh password 123' },
      });
      expect(reset.statusCode).toBe(200);
      expect((await listSessions(b, u.cookie)).statusCode).toBe(401);
      expect(events.some((e) => e.userId === u.id && e.reason === 'password_reset')).toBe(true);
    } finally {
      off();
    }
  });

  it('a demoted admin cannot use a cached session snapshot on admin routes', async () => {
    const boss = await createAdmin(a, env.smtp);
    const other = await createAdmin(a, env.smtp);
    // The snapshot cookie (session_data) is part of other.cookie and still claims role admin.
    expect(other.cookie).toContain('session_data');
    const demote = await a.inject({
      method: 'POST',
      url: '/auth/admin/set-role',
      headers: jsonHeaders(boss.cookie),
      payload: { userId: other.id, role: 'user' },
    });
    expect(demote.statusCode).toBe(200);
    const list = await b.inject({
      method: 'GET',
      url: '/auth/admin/list-users',
      headers: { cookie: other.cookie },
    });
    expect(list.statusCode).toBe(403);
    expect((await b.ctx.sessions.fromHeaders({ cookie: other.cookie }))?.user.role).toBe('user');
  });
});

describe('sessions when the store is unreachable', () => {
  let env: TestEnv;
  let redis: { url: string; proc: ChildProcess };
  beforeAll(async () => {
    redis = await startRedis();
    env = await createTestEnv({ CACHE_URL: redis.url });
  });
  afterAll(async () => {
    await env.close();
    if (redis.proc.exitCode === null) redis.proc.kill('SIGKILL');
  });

  it('falls back to PostgreSQL and keeps revoked sessions revoked', async () => {
    const app = await env.app();
    const u = await createVerifiedUser(app, env.smtp);
    const gone = await createVerifiedUser(app, env.smtp);
    await app.inject({
      method: 'POST',
      url: '/auth/sign-out',
      headers: jsonHeaders(gone.cookie),
      payload: {},
    });
    const resolver = app.ctx.sessions as typeof app.ctx.sessions & { stats: { database: number } };
    const before = resolver.stats.database;
    redis.proc.kill('SIGKILL');
    await once(redis.proc, 'exit');
    const ctx = await app.ctx.sessions.fromHeaders({ cookie: u.cookie });
    expect(ctx?.user.id).toBe(u.id);
    expect(resolver.stats.database).toBeGreaterThan(before);
    expect(await app.ctx.sessions.fromHeaders({ cookie: gone.cookie })).toBeNull();
    const s = await app.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: u.cookie } });
    expect(s.statusCode).toBe(200);
    expect(s.json()?.user?.id).toBe(u.id);
    // docs/operations.md: degraded still means every feature works on this instance. Sign-in creates the session in
    // PostgreSQL (the store copy is repaired later) and the new session works at once.
    const signInRes = await app.inject({
      method: 'POST',
      url: '/auth/sign-in/email',
      headers: jsonHeaders(),
      payload: { email: u.email, password: u.password },
    });
    expect(signInRes.statusCode).toBe(200);
    const fresh = cookieFrom(signInRes.headers['set-cookie']);
    expect((await app.ctx.sessions.fromHeaders({ cookie: fresh }))?.user.id).toBe(u.id);
    // The rate-limited routes keep answering (never a blanket 503) under a per-instance limit (never unlimited):
    // AUTH_RATE_LIMIT_MAX=3 on this instance, so the fourth request from one address is refused.
    const limited = await env.app({ AUTH_RATE_LIMIT_MAX: '3' });
    for (const [url, payload] of [
      ['/auth/sign-in/email', { email: u.email, password: 'wrong password' }],
      ['/auth/sign-in/username', { username: 'nobody_here', password: 'wrong password' }],
      ['/auth/sign-up/email', { email: uniqueEmail(), password: 'long enough pw', name: 'N' }],
      ['/auth/forget-password', { email: u.email }],
      ['/auth/sign-in/magic-link', { email: u.email }],
    ] as const) {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await limited.inject({ method: 'POST', url, headers: jsonHeaders(), payload });
        statuses.push(res.statusCode);
      }
      expect(
        statuses.slice(0, 3).every((s) => s !== 503 && s !== 429 && s < 500),
        url,
      ).toBe(true);
      expect(statuses[3], url).toBe(429);
    }
    const health = await app.inject({ method: 'GET', url: '/health' });
    expect(health.json().status).toBe('degraded');
  });
});
