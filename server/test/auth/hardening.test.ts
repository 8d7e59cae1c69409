// Issue 9 on /auth: profile text and image rules on every path that writes them, the role vocabulary and the
// last administrator, hashed one-time tokens in the store, token-free access logs, warn-level logging of
// refused origins, the request URL handed to better-auth, and contract error bodies for 429 and disabled routes.

import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { eq } from 'drizzle-orm';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { BAN_EXPIRES_IN_MAX_S as BAN_MAX_S } from '../../src/auth/account-rules.js';
import { user as userTable } from '../../src/infra/schema/index.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { TEST_REDIS_URL } from '../helpers/env.js';
import { tokenFrom } from '../helpers/smtp.js';
import { createAdmin, createVerifiedUser, jsonHeaders, uniqueEmail } from '../helpers/users.js';

/** A fresh username within the plugin's rule (3–30 of [a-zA-Z0-9_.]). */
const uniqueUsername = (tag: string) => `${tag}_${randomBytes(4).toString('hex')}`;

const post = (app: App, url: string, payload: unknown, cookie?: string) =>
  app.inject({ method: 'POST', url, headers: jsonHeaders(cookie), payload: payload as object });

describe('profile text and image', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
  });
  afterAll(() => env.close());

  const signUp = (name: unknown, extra: object = {}) =>
    post(app, '/auth/sign-up/email', {
      email: uniqueEmail(),
      password: 'correct horse battery',
      name,
      ...extra,
    });

  it.each([
    ['empty after trim', '   '],
    ['longer than 64 characters', 'x'.repeat(65)],
    ['a newline', 'Ann\nVisit http://spam.example'],
    ['a control character', 'Ann\u0007'],
    ['a line separator', 'Ann\u2028Bob'],
    // Issue 22 (8): invisible and bidirectional control characters.
    ['a zero-width space', 'admin\u200b'],
    ['a right-to-left override', 'Ann\u202egnp.exe'],
    ['a left-to-right mark', '\u200eAnn'],
    ['a bidi isolate', 'Ann\u2066Bob\u2069'],
    ['a word joiner', 'An\u2060n'],
    ['a byte order mark', 'An\ufeffn'],
    ['a soft hyphen', 'An\u00adn'],
    ['an Arabic letter mark', 'Ann\u061c'],
    ['a trailing zero-width joiner', 'Ann\u200d'],
    ['a zero-width non-joiner next to a space', 'Ann \u200cBob'],
    ['a deprecated format character', 'Ann\u206aBob'],
    ['an interlinear annotation character', 'Ann\ufff9Bob'],
  ])('sign-up refuses a name that is %s (400 INVALID_NAME)', async (_, name) => {
    const res = await signUp(name);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_NAME', message: expect.any(String) });
  });

  it('sign-up trims the name and accepts 64 characters (emoji count as one)', async () => {
    const res = await signUp(`  ${'😀'.repeat(64)}  `);
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { user: { name: string } }).user.name).toBe('😀'.repeat(64));
  });

  it.each([
    ['a Persian name with a zero-width non-joiner', 'می\u200cخواهم'],
    ['an emoji family (zero-width joiners)', 'Ann 👨\u200d👩\u200d👧'],
    ['a right-to-left script', 'مریم'],
  ])('sign-up accepts %s', async (_, name) => {
    const res = await signUp(name);
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { user: { name: string } }).user.name).toBe(name);
  });

  it('update-user refuses an invisible character too', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const res = await post(app, '/auth/update-user', { name: 'Ann\u202e' }, u.cookie);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_NAME' });
  });

  it.each([
    ['javascript:', 'javascript:alert(1)'],
    ['http', 'http://img.example/a.png'],
    ['too long', `https://img.example/${'a'.repeat(2050)}`],
    ['not a URL', 'not a url'],
  ])('sign-up refuses an image that is %s (400 INVALID_IMAGE)', async (_, image) => {
    const res = await signUp('Ann', { image });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_IMAGE' });
  });

  it('update-user refuses a multi-line name and an http image, accepts an https image', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const badName = await post(app, '/auth/update-user', { name: 'a\nb' }, u.cookie);
    expect(badName.statusCode).toBe(400);
    expect(badName.json()).toMatchObject({ code: 'INVALID_NAME' });
    const badImage = await post(app, '/auth/update-user', { image: 'http://x.example/a.png' }, u.cookie);
    expect(badImage.statusCode).toBe(400);
    expect(badImage.json()).toMatchObject({ code: 'INVALID_IMAGE' });
    const ok = await post(app, '/auth/update-user', { image: 'https://x.example/a.png' }, u.cookie);
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('admin create-user and update-user apply the same rules', async () => {
    const admin = await createAdmin(app, env.smtp);
    const created = await post(
      app,
      '/auth/admin/create-user',
      { email: uniqueEmail(), password: 'correct horse battery', name: 'x'.repeat(65) },
      admin.cookie,
    );
    expect(created.statusCode).toBe(400);
    expect(created.json()).toMatchObject({ code: 'INVALID_NAME' });
    const u = await createVerifiedUser(app, env.smtp);
    const updated = await post(
      app,
      '/auth/admin/update-user',
      { userId: u.id, data: { image: 'javascript:alert(1)' } },
      admin.cookie,
    );
    expect(updated.statusCode).toBe(400);
    expect(updated.json()).toMatchObject({ code: 'INVALID_IMAGE' });
  });

  it('a magic-link sign-up with a multi-line name is refused before any email is sent', async () => {
    const email = uniqueEmail('ml');
    const res = await post(app, '/auth/sign-in/magic-link', { email, name: 'a\nb' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_NAME' });
    await new Promise((r) => setTimeout(r, 200));
    expect(env.smtp.messages.some((m) => m.to.includes(email))).toBe(false);
  });
});

describe('roles and the last administrator', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
  });
  afterAll(() => env.close());

  it.each([['admin,user'], [['admin', 'user']], ['superuser'], ['']])(
    'set-role refuses %j (400 INVALID_ROLE)',
    async (role) => {
      const admin = await createAdmin(app, env.smtp);
      const u = await createVerifiedUser(app, env.smtp);
      const res = await post(app, '/auth/admin/set-role', { userId: u.id, role }, admin.cookie);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ code: 'INVALID_ROLE' });
    },
  );

  it('admin create-user refuses a combined role', async () => {
    const admin = await createAdmin(app, env.smtp);
    const res = await post(
      app,
      '/auth/admin/create-user',
      { email: uniqueEmail(), password: 'correct horse battery', name: 'Combo', role: 'admin,user' },
      admin.cookie,
    );
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_ROLE' });
  });

  it('refuses to demote or ban the last active administrator (400 LAST_ADMIN)', async () => {
    // Fresh deployment: no admin yet in this one.
    const lonely = await createTestEnv();
    try {
      const solo = await lonely.app();
      const a = await createAdmin(solo, lonely.smtp);
      const b = await createAdmin(solo, lonely.smtp);
      // Two admins: one may demote the other.
      const demote = await post(solo, '/auth/admin/set-role', { userId: b.id, role: 'user' }, a.cookie);
      expect(demote.statusCode, demote.body).toBe(200);
      // Now `a` is the last one.
      const self = await post(solo, '/auth/admin/set-role', { userId: a.id, role: 'user' }, a.cookie);
      expect(self.statusCode).toBe(400);
      expect(self.json()).toMatchObject({ code: 'LAST_ADMIN' });
      const viaUpdate = await post(
        solo,
        '/auth/admin/update-user',
        { userId: a.id, data: { role: 'user' } },
        a.cookie,
      );
      expect(viaUpdate.statusCode).toBe(400);
      expect(viaUpdate.json()).toMatchObject({ code: 'LAST_ADMIN' });
      // A second admin who is banned does not count: banning them leaves `a` last, and `a` stays protected.
      const promote = await post(solo, '/auth/admin/set-role', { userId: b.id, role: 'admin' }, a.cookie);
      expect(promote.statusCode).toBe(200);
      const ban = await post(solo, '/auth/admin/ban-user', { userId: b.id }, a.cookie);
      expect(ban.statusCode, ban.body).toBe(200);
      const again = await post(solo, '/auth/admin/set-role', { userId: a.id, role: 'user' }, a.cookie);
      expect(again.json()).toMatchObject({ code: 'LAST_ADMIN' });
      const remove = await post(solo, '/auth/admin/remove-user', { userId: a.id }, a.cookie);
      expect(remove.statusCode).toBeGreaterThanOrEqual(400);
    } finally {
      await lonely.close();
    }
  });
});

describe('one-time tokens and logs', () => {
  let env: TestEnv;
  let app: App;
  let redis: Redis;
  const lines: string[] = [];
  beforeAll(async () => {
    env = await createTestEnv();
    // development: the access log (one "request completed" line per request) is on, as in production.
    app = await env.app(
      { NODE_ENV: 'development', LOG_LEVEL: 'info' },
      { logStream: { write: (line: string) => void lines.push(line) } },
    );
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    redis.disconnect();
    await env.close();
  });

  const storeKeys = async () => redis.keys(`${env.prefix}auth:verification:*`);

  it('stores the password-reset token hashed, and the link still works', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const res = await post(app, '/auth/request-password-reset', { email: u.email });
    expect(res.statusCode).toBe(200);
    const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && /reset/i.test(m.subject));
    const token = tokenFrom(mail, 'reset-password');
    const keys = await storeKeys();
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.some((k) => k.includes(token))).toBe(false);
    const reset = await post(app, '/auth/reset-password', { token, newPassword: 'another long password' });
    expect(reset.statusCode, reset.body).toBe(200);
  });

  it('stores the magic-link token hashed, and the link still works', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const res = await post(app, '/auth/sign-in/magic-link', { email: u.email });
    expect(res.statusCode, res.body).toBe(200);
    const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && /sign-in link/i.test(m.subject));
    const token = tokenFrom(mail, 'magic-link');
    expect((await storeKeys()).some((k) => k.includes(token))).toBe(false);
    const verify = await app.inject({ url: `/auth/magic-link/verify?token=${encodeURIComponent(token)}` });
    expect(verify.statusCode).toBeLessThan(400);
    expect(String(verify.headers['set-cookie'] ?? '')).toContain('session_token');
  });

  it('access logs carry no token from a query string or a reset-password path', async () => {
    const secret = `tok${'Z'.repeat(24)}`;
    lines.length = 0;
    await app.inject({ url: `/auth/verify-email?token=${secret}a` });
    await app.inject({ url: `/auth/magic-link/verify?token=${secret}b` });
    await app.inject({ url: `/auth/reset-password/${secret}c?callbackURL=%2Freset` });
    await new Promise((r) => setTimeout(r, 100));
    const text = lines.join('');
    expect(text).toContain('request completed');
    expect(text).toContain('/auth/reset-password/[redacted]');
    expect(text).not.toContain(secret);
  });

  it('logs a refused callback URL at warn level, not error', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    lines.length = 0;
    const res = await post(app, '/auth/sign-in/email', {
      email: u.email,
      password: u.password,
      callbackURL: 'https://evil.example/steal',
    });
    expect(res.statusCode).toBe(403);
    await new Promise((r) => setTimeout(r, 100));
    const entries = lines.map((l) => JSON.parse(l) as { level: number; msg: string });
    const refusal = entries.filter((e) => e.msg.includes('Invalid callbackURL'));
    expect(refusal.length).toBeGreaterThan(0);
    expect(refusal.every((e) => e.level === 40)).toBe(true);
    expect(entries.some((e) => e.level >= 50)).toBe(false);
  });

  it('hands better-auth a URL built from the path only (absolute-form request target)', async () => {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const seen: string[] = [];
    const auth = app.ctx.auth;
    const original = auth.handler;
    auth.handler = async (request: Request) => {
      seen.push(request.url);
      return original(request);
    };
    try {
      const port = (app.server.address() as AddressInfo).port;
      const response = await new Promise<string>((resolve, reject) => {
        const socket = net.connect({ port, host: '127.0.0.1' }, () => {
          socket.write(
            'GET http://evil.example/auth/get-session HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n',
          );
        });
        let data = '';
        socket.on('data', (c) => {
          data += c.toString('utf8');
        });
        socket.on('end', () => resolve(data));
        socket.on('error', reject);
      });
      expect(response).toMatch(/^HTTP\/1\.1 \d{3}/);
      expect(seen.length).toBeGreaterThan(0);
      for (const url of seen) expect(new URL(url).origin).toBe(app.ctx.config.API_BASE_URL);
    } finally {
      auth.handler = original;
    }
  });
});

describe("better-auth's own error bodies", () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv({ AUTH_RATE_LIMIT_MAX: '2' });
    app = await env.app();
  });
  afterAll(() => env.close());

  it('a disabled route (delete-user) answers 404 NOT_FOUND in the contract body and is not documented', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const res = await post(app, '/auth/delete-user', {}, u.cookie);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'NOT_FOUND', message: expect.any(String) });
    const unknown = await app.inject({ url: '/auth/no-such-route' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ code: 'NOT_FOUND' });
    const doc = (await app.inject({ url: '/openapi.json' })).json() as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/auth/delete-user'))).toEqual([]);
    expect(doc.paths['/auth/sign-in/email']).toBeDefined();
  });

  it('429 carries code RATE_LIMITED and Retry-After', async () => {
    let last = await post(app, '/auth/sign-in/email', { email: uniqueEmail(), password: 'wrong password' });
    for (let i = 0; i < 3; i++) {
      last = await post(app, '/auth/sign-in/email', { email: uniqueEmail(), password: 'wrong password' });
    }
    expect(last.statusCode).toBe(429);
    expect(last.json()).toMatchObject({ code: 'RATE_LIMITED', message: expect.any(String) });
    expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);
  });
});

// Fuzzing findings (issue: /auth input validation): every field a client sends to better-auth's routes is
// checked before better-auth's handlers or hooks see it, so bad input is a 400 VALIDATION_ERROR (never a 500)
// and changes nothing.
describe('fuzzed /auth input', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
  });
  afterAll(() => env.close());

  const stored = async (id: string) => {
    const [row] = await app.ctx.database.db.select().from(userTable).where(eq(userTable.id, id));
    if (!row) throw new Error(`user ${id} not found`);
    return row;
  };
  const byEmail = (email: string) =>
    app.ctx.database.db.select().from(userTable).where(eq(userTable.email, email));
  const expectValidationError = (res: { statusCode: number; body: string; json: () => unknown }) => {
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.any(String) });
  };

  describe('displayUsername', () => {
    it.each([
      ['50,000 characters', 'D'.repeat(50_000)],
      ['65 characters', 'D'.repeat(65)],
      ['empty after trim', '   '],
      ['multi-line', 'Ann\nBob'],
      ['a control character', 'Ann\u0007'],
      ['a zero-width space', 'admin\u200b'],
      ['a number', 5],
      ['an object', { a: 1 }],
      ['an array', ['Ann']],
      ['null', null],
    ])('update-user refuses one that is %s and keeps the stored one', async (_, displayUsername) => {
      const u = await createVerifiedUser(app, env.smtp, { username: uniqueUsername('du') });
      const before = await stored(u.id);
      const res = await post(app, '/auth/update-user', { displayUsername }, u.cookie);
      expectValidationError(res);
      expect(res.json()).toMatchObject({ details: [{ path: 'body.displayUsername' }] });
      const after = await stored(u.id);
      expect(after.displayUsername).toBe(before.displayUsername);
      expect(after.updatedAt).toEqual(before.updatedAt);
    });

    it('a refused one cannot lock the account out: sessions keep working with small cookies', async () => {
      const u = await createVerifiedUser(app, env.smtp);
      await post(app, '/auth/update-user', { displayUsername: 'D'.repeat(50_000) }, u.cookie);
      const session = await app.inject({ url: '/auth/get-session', headers: { cookie: u.cookie } });
      expect(session.statusCode).toBe(200);
      const setCookie = [session.headers['set-cookie'] ?? []].flat();
      expect(setCookie.join('').length).toBeLessThan(4096);
    });

    it('update-user accepts 64 characters (trimmed) and sign-up accepts a display form', async () => {
      const u = await createVerifiedUser(app, env.smtp);
      const ok = await post(app, '/auth/update-user', { displayUsername: ` ${'é'.repeat(64)} ` }, u.cookie);
      expect(ok.statusCode, ok.body).toBe(200);
      expect((await stored(u.id)).displayUsername).toBe('é'.repeat(64));
      const email = uniqueEmail();
      const signUp = await post(app, '/auth/sign-up/email', {
        email,
        password: 'correct horse battery',
        name: 'Ann',
        username: uniqueUsername('ann'),
        displayUsername: 'Ann the First',
      });
      expect(signUp.statusCode, signUp.body).toBe(200);
      expect((await byEmail(email))[0]?.displayUsername).toBe('Ann the First');
    });

    it('sign-up refuses an unbounded one and creates no user', async () => {
      const email = uniqueEmail();
      const res = await post(app, '/auth/sign-up/email', {
        email,
        password: 'correct horse battery',
        name: 'Ann',
        displayUsername: 'D'.repeat(50_000),
      });
      expectValidationError(res);
      expect(await byEmail(email)).toEqual([]);
    });

    it('admin update-user and create-user apply the same rule', async () => {
      const admin = await createAdmin(app, env.smtp);
      const u = await createVerifiedUser(app, env.smtp);
      const before = await stored(u.id);
      const updated = await post(
        app,
        '/auth/admin/update-user',
        { userId: u.id, data: { displayUsername: 'D'.repeat(5_000) } },
        admin.cookie,
      );
      expectValidationError(updated);
      expect((await stored(u.id)).displayUsername).toBe(before.displayUsername);
      const email = uniqueEmail();
      const created = await post(
        app,
        '/auth/admin/create-user',
        { email, password: 'correct horse battery', name: 'Ann', data: { displayUsername: 'a\nb' } },
        admin.cookie,
      );
      expectValidationError(created);
      expect(await byEmail(email)).toEqual([]);
    });
  });

  describe('other fields of the session snapshot', () => {
    it('admin update-user refuses an unbounded or malformed locale and an unbounded ban reason', async () => {
      const admin = await createAdmin(app, env.smtp);
      const u = await createVerifiedUser(app, env.smtp);
      const before = await stored(u.id);
      for (const data of [
        { locale: 'x'.repeat(5_000) },
        { locale: 'not a tag' },
        { locale: 42 },
        { banReason: 'r'.repeat(5_000) },
      ]) {
        const res = await post(app, '/auth/admin/update-user', { userId: u.id, data }, admin.cookie);
        expectValidationError(res);
      }
      const after = await stored(u.id);
      expect(after.locale).toBe(before.locale);
      expect(after.banReason).toBe(before.banReason);
      const ok = await post(
        app,
        '/auth/admin/update-user',
        { userId: u.id, data: { locale: 'DE-at' } },
        admin.cookie,
      );
      expect(ok.statusCode, ok.body).toBe(200);
      expect((await stored(u.id)).locale).toBe('de-AT');
    });

    it('sign-up and admin create-user refuse an email longer than 254 characters', async () => {
      const email = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.test`;
      expect(email.length).toBeGreaterThan(254);
      const res = await post(app, '/auth/sign-up/email', {
        email,
        password: 'correct horse battery',
        name: 'Ann',
      });
      expectValidationError(res);
      expect(await byEmail(email)).toEqual([]);
      const admin = await createAdmin(app, env.smtp);
      const created = await post(
        app,
        '/auth/admin/create-user',
        { email, password: 'correct horse battery', name: 'Ann' },
        admin.cookie,
      );
      expectValidationError(created);
      expect(await byEmail(email)).toEqual([]);
    });
  });

  describe('username that is not a string', () => {
    const NOT_STRINGS: unknown[] = [1, -1, 1.5, 0, true, false, null, [], {}, [1], { a: 1 }];

    it.each(NOT_STRINGS.map((v) => [JSON.stringify(v), v]))(
      'update-user refuses %s and keeps the stored username',
      async (_, username) => {
        const u = await createVerifiedUser(app, env.smtp, { username: uniqueUsername('kept') });
        const before = await stored(u.id);
        const res = await post(app, '/auth/update-user', { username }, u.cookie);
        expectValidationError(res);
        expect(res.json()).toMatchObject({ details: [{ path: 'body.username' }] });
        const after = await stored(u.id);
        expect(after.username).toBe(before.username);
        expect(after.displayUsername).toBe(before.displayUsername);
      },
    );

    it.each(NOT_STRINGS.map((v) => [JSON.stringify(v), v]))(
      'sign-up refuses %s and creates no user',
      async (_, username) => {
        const email = uniqueEmail();
        const res = await post(app, '/auth/sign-up/email', {
          email,
          password: 'correct horse battery',
          name: 'Ann',
          username,
        });
        expectValidationError(res);
        expect(await byEmail(email)).toEqual([]);
      },
    );

    it.each(NOT_STRINGS.map((v) => [JSON.stringify(v), v]))(
      'sign-in/username and is-username-available refuse %s',
      async (_, username) => {
        const signIn = await post(app, '/auth/sign-in/username', {
          username,
          password: 'correct horse battery',
        });
        expectValidationError(signIn);
        const available = await post(app, '/auth/is-username-available', { username });
        expectValidationError(available);
      },
    );

    it('admin update-user refuses a non-string username', async () => {
      const admin = await createAdmin(app, env.smtp);
      const u = await createVerifiedUser(app, env.smtp, { username: uniqueUsername('adm') });
      const res = await post(
        app,
        '/auth/admin/update-user',
        { userId: u.id, data: { username: 1 } },
        admin.cookie,
      );
      expectValidationError(res);
      expect((await stored(u.id)).username).toBe(u.username);
    });
  });

  describe('a JSON body that is not an object', () => {
    const BODIES = ['1e309', '-1e309', '1e400', 'null', '0', '"text"', 'true', '[]', '[{"name":"Ann"}]'];

    it.each(BODIES)('sign-up/email answers %s with 400 and creates nothing', async (payload) => {
      const res = await app.inject({
        method: 'POST',
        url: '/auth/sign-up/email',
        headers: jsonHeaders(),
        payload,
      });
      expectValidationError(res);
      expect(res.json()).toMatchObject({ details: [{ path: 'body' }] });
    });

    it.each(BODIES)('update-user answers %s with 400 and changes nothing', async (payload) => {
      const u = await createVerifiedUser(app, env.smtp);
      const before = await stored(u.id);
      const res = await app.inject({
        method: 'POST',
        url: '/auth/update-user',
        headers: jsonHeaders(u.cookie),
        payload,
      });
      expectValidationError(res);
      expect(await stored(u.id)).toEqual(before);
    });

    it.each(['/auth/sign-in/email', '/auth/sign-out', '/auth/admin/ban-user', '/auth/verify-email'])(
      '%s answers 1e309 with 400 VALIDATION_ERROR too',
      async (url) => {
        const res = await app.inject({ method: 'POST', url, headers: jsonHeaders(), payload: '1e309' });
        expectValidationError(res);
      },
    );
  });

  describe('banExpiresIn', () => {
    it.each([
      ['1e16', 1e16],
      ['1e20', 1e20],
      ['1e308', 1e308],
      ['MAX_SAFE_INTEGER', Number.MAX_SAFE_INTEGER],
      ['-1e308', -1e308],
      ['-1', -1],
      ['0', 0],
      ['a fraction', 1.5],
      ['just over 100 years', BAN_MAX_S + 1],
      ['a string', '60'],
      ['null', null],
    ])('ban-user refuses %s and leaves the user unbanned and signed in', async (_, banExpiresIn) => {
      const admin = await createAdmin(app, env.smtp);
      const u = await createVerifiedUser(app, env.smtp);
      const res = await post(app, '/auth/admin/ban-user', { userId: u.id, banExpiresIn }, admin.cookie);
      expectValidationError(res);
      expect(res.json()).toMatchObject({ details: [{ path: 'body.banExpiresIn' }] });
      const after = await stored(u.id);
      expect(after.banned).not.toBe(true);
      expect(after.banExpires).toBeNull();
      const session = await app.inject({ url: '/auth/get-session', headers: { cookie: u.cookie } });
      expect(session.json()).toMatchObject({ user: { id: u.id } });
    });

    it('ban-user accepts a whole number of seconds up to 100 years', async () => {
      const admin = await createAdmin(app, env.smtp);
      for (const seconds of [60, BAN_MAX_S]) {
        const u = await createVerifiedUser(app, env.smtp);
        const start = Date.now();
        const res = await post(
          app,
          '/auth/admin/ban-user',
          { userId: u.id, banExpiresIn: seconds },
          admin.cookie,
        );
        expect(res.statusCode, res.body).toBe(200);
        const after = await stored(u.id);
        expect(after.banned).toBe(true);
        const expires = after.banExpires?.getTime() ?? 0;
        expect(expires).toBeGreaterThanOrEqual(start + seconds * 1000 - 1000);
        expect(expires).toBeLessThanOrEqual(Date.now() + seconds * 1000 + 1000);
      }
    });
  });
});

describe('a JSON body that is not an object counts against the route rate limit', () => {
  let env: TestEnv;
  let app: App;
  const MAX = 3;
  beforeAll(async () => {
    env = await createTestEnv({ AUTH_RATE_LIMIT_MAX: String(MAX), AUTH_RATE_LIMIT_WINDOW_S: '60' });
    app = await env.app();
  });
  afterAll(() => env.close());

  it.each(['/auth/sign-up/email', '/auth/sign-in/email'])('%s: 400 then 429', async (url) => {
    const address = url === '/auth/sign-up/email' ? '10.7.7.1' : '10.7.7.2';
    const statuses: number[] = [];
    for (let i = 0; i < MAX + 2; i++) {
      const res = await app.inject({
        method: 'POST',
        url,
        headers: jsonHeaders(),
        payload: i % 2 === 0 ? '1e309' : '[1]',
        remoteAddress: address,
      });
      statuses.push(res.statusCode);
      if (res.statusCode === 400) expect(res.json()).toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    expect(statuses).toEqual([...Array(MAX).fill(400), 429, 429]);
  });
});

// Client-caused better-auth messages are warnings: at error level anyone could flood the error log and its alerts
// with forged OAuth callbacks (fuzzing logged ~1,150 such lines). One line per request either way.
describe('better-auth messages a request alone can cause', () => {
  let env: TestEnv;
  let app: App;
  const lines: Array<{ level: number; msg?: string }> = [];
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app(
      { LOG_LEVEL: 'warn' },
      {
        logStream: {
          write(chunk: string) {
            for (const line of chunk.split('\n').filter(Boolean)) lines.push(JSON.parse(line));
          },
        },
      },
    );
  });
  afterAll(() => env.close());

  it('logs forged callbacks and unknown providers as warnings, never errors', async () => {
    const requests = [
      { method: 'GET' as const, url: '/auth/callback/github?state=forged&code=x' },
      { method: 'GET' as const, url: '/auth/callback/github?code=x' },
      { method: 'POST' as const, url: '/auth/sign-in/social', payload: { provider: 'no-such-provider' } },
    ];
    for (const r of requests) {
      const res = await app.inject({ ...r, headers: jsonHeaders() });
      expect(res.statusCode, `${r.url} ${res.body}`).toBeLessThan(500);
    }
    const fromAuth = lines.filter((l) => l.msg?.startsWith('better-auth:'));
    expect(fromAuth.length).toBeGreaterThan(0);
    expect(fromAuth.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([]);
  });
});
