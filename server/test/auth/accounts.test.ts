// Accounts (docs/architecture.md "Accounts and sessions") end to end over HTTP with the real SMTP capture: sign-up, verification (GET and POST), sign-in,
// session, sign-out, reset (both paths), magic link, username, ADMIN_EMAILS promotion, admin plugin, CLI.
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createAdmin as cliCreateAdmin, runCli } from '../../src/cli.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { tokenFrom } from '../helpers/smtp.js';
import {
  cookieFrom,
  createAdmin,
  createVerifiedUser,
  jsonHeaders,
  signIn,
  uniqueEmail,
} from '../helpers/users.js';

describe('accounts', () => {
  let env: TestEnv;
  let app: App;
  const adminEmail = uniqueEmail('boss');
  beforeAll(async () => {
    env = await createTestEnv({ ADMIN_EMAILS: ` "${adminEmail.toUpperCase()}" , other@example.test` });
    app = await env.app();
  });
  afterAll(() => env.close());

  const post = (url: string, payload: unknown, cookie?: string) =>
    app.inject({ method: 'POST', url, headers: jsonHeaders(cookie), payload: payload as object });
  const session = (cookie: string) =>
    app.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie } });

  async function signUp(email: string, password = 'correct horse battery', extra: object = {}) {
    const res = await post('/auth/sign-up/email', { email, password, name: 'Ann', ...extra });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['set-cookie']).toBeUndefined();
    return res.json() as { user: { id: string; emailVerified: boolean } };
  }

  it('a resend right after sign-up (the same second, the same JWT) sends a second verification email', async () => {
    const email = uniqueEmail('again');
    await signUp(email);
    const resend = await post('/auth/send-verification-email', { email });
    expect(resend.statusCode, resend.body).toBe(200);
    const verifyMails = () =>
      env.smtp.messages.filter((m) => m.to.includes(email) && m.subject.includes('Verify'));
    await env.smtp.waitFor(() => verifyMails().length >= 2);
    expect(verifyMails()).toHaveLength(2);
  });

  it('sign-up sends a verification link to FE_BASE_URL; GET verify works; sign-in, session and sign-out', async () => {
    const email = uniqueEmail();
    const { user } = await signUp(email);
    expect(user.emailVerified).toBe(false);
    const mail = await env.smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('Verify'));
    expect(mail.text).toContain(`${TEST_ORIGIN}/verify-email?token=`);
    expect(mail.html).toContain(`${TEST_ORIGIN}/verify-email?token=`);

    const before = await post('/auth/sign-in/email', { email, password: 'correct horse battery' });
    expect(before.statusCode).toBe(403);
    expect(before.json().code).toBe('EMAIL_NOT_VERIFIED');

    const verify = await app.inject({
      method: 'GET',
      url: `/auth/verify-email?token=${encodeURIComponent(tokenFrom(mail, 'verify-email'))}`,
    });
    expect(verify.statusCode).toBe(200);

    const signInRes = await post('/auth/sign-in/email', { email, password: 'correct horse battery' });
    expect(signInRes.statusCode).toBe(200);
    const setCookie = ([] as string[]).concat(signInRes.headers['set-cookie'] ?? []);
    const tokenCookie = setCookie.find((c) => c.startsWith('better-auth.session_token='));
    expect(tokenCookie).toMatch(/HttpOnly/i);
    expect(tokenCookie).toMatch(/SameSite=Lax/i);
    expect(tokenCookie).not.toMatch(/Secure/);
    const cookie = cookieFrom(signInRes.headers['set-cookie']);

    const s = await session(cookie);
    expect(s.statusCode).toBe(200);
    expect(s.json().user).toMatchObject({ id: user.id, email, emailVerified: true, role: 'user' });

    const out = await post('/auth/sign-out', {}, cookie);
    expect(out.statusCode).toBe(200);
    const after = await session(cookie);
    expect(after.statusCode).toBe(200);
    expect(after.json()).toBeNull();
    expect(await app.ctx.sessions.fromHeaders({ cookie })).toBeNull();
  });

  it('verifies by POST /auth/verify-email { token } and rejects bad POST bodies', async () => {
    const email = uniqueEmail();
    await signUp(email);
    const mail = await env.smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('Verify'));
    for (const bad of [{}, { token: 5 }, { token: '' }, { token: 'x', extra: 1 }, []]) {
      const res = await post('/auth/verify-email', bad);
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
    }
    const wrong = await post('/auth/verify-email', { token: 'not-a-token' });
    expect(wrong.statusCode).toBeGreaterThanOrEqual(400);
    expect(wrong.statusCode).toBeLessThan(500);
    const ok = await post('/auth/verify-email', { token: tokenFrom(mail, 'verify-email') });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(await signIn(app, email, 'correct horse battery')).toContain('session_token');
  });

  it('refuses short passwords and wrong credentials', async () => {
    const short = await post('/auth/sign-up/email', { email: uniqueEmail(), password: 'short7!', name: 'A' });
    expect(short.statusCode).toBe(400);
    expect(short.json().code).toBe('PASSWORD_TOO_SHORT');
    const long = await post('/auth/sign-up/email', {
      email: uniqueEmail(),
      password: 'x'.repeat(129),
      name: 'A',
    });
    expect(long.statusCode).toBe(400);
    const u = await createVerifiedUser(app, env.smtp);
    const wrong = await post('/auth/sign-in/email', { email: u.email, password: 'wrong password!' });
    expect(wrong.statusCode).toBe(401);
  });

  for (const path of ['/auth/forget-password', '/auth/request-password-reset']) {
    it(`resets the password via ${path}: old password and other sessions stop working`, async () => {
      const u = await createVerifiedUser(app, env.smtp);
      const other = await signIn(app, u.email, u.password);
      const unknown = await post(path, { email: uniqueEmail('nobody'), redirectTo: `${TEST_ORIGIN}/x` });
      expect(unknown.statusCode).toBe(200);
      const res = await post(path, { email: u.email });
      expect(res.statusCode, res.body).toBe(200);
      const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject.includes('Reset'));
      expect(mail.text).toContain(`${TEST_ORIGIN}/reset-password?token=`);
      const reset = await post('/auth/reset-password', {
        token: tokenFrom(mail, 'reset-password'),
        newPassword: 'a brand new password',
      });
      expect(reset.statusCode, reset.body).toBe(200);
      const old = await post('/auth/sign-in/email', { email: u.email, password: u.password });
      expect(old.statusCode).toBe(401);
      expect(await signIn(app, u.email, 'a brand new password')).toContain('session_token');
      for (const cookie of [u.cookie, other]) {
        expect((await session(cookie)).json()).toBeNull();
        expect(await app.ctx.sessions.fromHeaders({ cookie })).toBeNull();
      }
      const again = await post('/auth/reset-password', {
        token: tokenFrom(mail, 'reset-password'),
        newPassword: 'another new password',
      });
      expect(again.statusCode).toBe(400);
    });
  }

  it('signs in with a magic link (FE link, one use)', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const res = await post('/auth/sign-in/magic-link', { email: u.email });
    expect(res.statusCode, res.body).toBe(200);
    const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject.includes('sign-in link'));
    expect(mail.text).toContain(`${TEST_ORIGIN}/magic-link?token=`);
    const token = tokenFrom(mail, 'magic-link');
    const verify = await app.inject({
      method: 'GET',
      url: `/auth/magic-link/verify?token=${encodeURIComponent(token)}`,
    });
    expect(verify.statusCode).toBeLessThan(400);
    const cookie = cookieFrom(verify.headers['set-cookie']);
    expect((await session(cookie)).json().user.id).toBe(u.id);
    const reuse = await app.inject({
      method: 'GET',
      url: `/auth/magic-link/verify?token=${encodeURIComponent(token)}`,
    });
    expect(cookieFrom(reuse.headers['set-cookie'])).not.toContain('session_token');
  });

  it('signs in with a username', async () => {
    const name = `ann_${Date.now().toString(36)}`;
    const u = await createVerifiedUser(app, env.smtp, { username: name });
    const res = await post('/auth/sign-in/username', { username: name, password: u.password });
    expect(res.statusCode, res.body).toBe(200);
    expect((await session(cookieFrom(res.headers['set-cookie']))).json().user.id).toBe(u.id);
    const bad = await post('/auth/sign-in/username', { username: name, password: 'nope nope nope' });
    expect(bad.statusCode).toBe(401);
  });

  it('promotes ADMIN_EMAILS at verification (list trimmed, quotes stripped, case-insensitive)', async () => {
    const u = await createVerifiedUser(app, env.smtp, { email: adminEmail });
    const s = await session(u.cookie);
    expect(s.json().user.role).toBe('admin');
    const ctx = await app.ctx.sessions.fromHeaders({ cookie: u.cookie });
    expect(ctx?.user.role).toBe('admin');
    const plain = await createVerifiedUser(app, env.smtp);
    expect((await session(plain.cookie)).json().user.role).toBe('user');
  });

  it('admin plugin routes work for admins only', async () => {
    const adminUser = await createAdmin(app, env.smtp);
    const u = await createVerifiedUser(app, env.smtp);
    const asUser = await app.inject({
      method: 'GET',
      url: '/auth/admin/list-users',
      headers: { cookie: u.cookie },
    });
    expect(asUser.statusCode).toBe(403);
    const anon = await app.inject({ method: 'GET', url: '/auth/admin/list-users' });
    expect(anon.statusCode).toBe(401);
    const list = await app.inject({
      method: 'GET',
      url: `/auth/admin/list-users?searchField=email&searchValue=${encodeURIComponent(u.email)}`,
      headers: { cookie: adminUser.cookie },
    });
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json().users.map((x: { id: string }) => x.id)).toContain(u.id);

    const promote = await post('/auth/admin/set-role', { userId: u.id, role: 'admin' }, u.cookie);
    expect(promote.statusCode).toBe(403);
    const setRole = await post('/auth/admin/set-role', { userId: u.id, role: 'admin' }, adminUser.cookie);
    expect(setRole.statusCode, setRole.body).toBe(200);
    // The user's live session sees the new role at once (the store snapshot is refreshed).
    expect((await app.ctx.sessions.fromHeaders({ cookie: u.cookie }))?.user.role).toBe('admin');

    const victim = await createVerifiedUser(app, env.smtp);
    const ban = await post(
      '/auth/admin/ban-user',
      { userId: victim.id, banReason: 'spam' },
      adminUser.cookie,
    );
    expect(ban.statusCode, ban.body).toBe(200);
    expect(await app.ctx.sessions.fromHeaders({ cookie: victim.cookie })).toBeNull();
    const banned = await post('/auth/sign-in/email', { email: victim.email, password: victim.password });
    expect(banned.statusCode).toBe(403);
    const unban = await post('/auth/admin/unban-user', { userId: victim.id }, adminUser.cookie);
    expect(unban.statusCode).toBe(200);
    expect(await signIn(app, victim.email, victim.password)).toContain('session_token');
  });

  it('cli create-admin creates a verified admin who can sign in; promotes an existing user', async () => {
    const email = uniqueEmail('cli');
    const result = await cliCreateAdmin(env.config(), { email, password: 'admin password 1' });
    expect(result.created).toBe(true);
    const cookie = await signIn(app, email, 'admin password 1');
    const s = (await session(cookie)).json();
    expect(s.user).toMatchObject({ email, role: 'admin', emailVerified: true });

    const u = await createVerifiedUser(app, env.smtp);
    const again = await cliCreateAdmin(env.config(), { email: u.email, password: 'changed password 2' });
    expect(again).toEqual({ id: u.id, created: false });
    expect((await app.ctx.sessions.fromHeaders({ cookie: u.cookie }))?.user.role).toBe('admin');
    expect(await signIn(app, u.email, 'changed password 2')).toContain('session_token');

    // No password anywhere and nothing on standard input: a clear error, not a hang.
    const noInput = { stdin: Readable.from([]), stderr: new PassThrough() };
    await expect(runCli(['create-admin', '--email', 'bad'], env.baseEnv, noInput)).rejects.toThrow(
      /no password/,
    );
    await expect(
      runCli(['create-admin', '--email', 'bad', '--password', 'long enough'], env.baseEnv),
    ).rejects.toThrow(/not an email/);
    await expect(runCli(['nope'], env.baseEnv)).rejects.toThrow(/unknown command/);
    expect(await runCli(['migrate'], env.baseEnv)).toBe('migrations applied');
  });
});
