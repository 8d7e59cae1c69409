// Email a product can ship under its own name (CONTRACT §12), through the real SMTP capture on a real instance:
// branding, templates and overrides, locales, one-click unsubscribe, digests.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../../src/app.js';
import { ConfigError } from '../../src/config.js';
import { createUnsubscribeTokens } from '../../src/email/tokens.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { TEST_AUTH_SECRET } from '../helpers/env.js';
import type { CapturedMail } from '../helpers/smtp.js';
import { tokenFrom } from '../helpers/smtp.js';
import { createVerifiedUser, jsonHeaders, signIn, type TestUser, uniqueEmail } from '../helpers/users.js';

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));
const WINDOW_MS = 2_000;
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Every visible place a product name can appear in an email. */
const everywhere = (m: CapturedMail) => [m.from, m.subject, m.html, m.text].join('\n');

describe('email: branding, templates, locales, unsubscribe, digests', () => {
  let env: TestEnv;
  let app: App;
  let overridesDir: string;

  const mailsTo = (email: string) => env.smtp.messages.filter((m) => m.to.includes(email));
  const signUp = async (opts: { locale?: unknown; email?: string } = {}) => {
    const email = opts.email ?? uniqueEmail('loc');
    const res = await app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      headers: jsonHeaders(),
      payload: {
        email,
        password: 'correct horse battery',
        name: 'Loc',
        ...(opts.locale === undefined ? {} : { locale: opts.locale }),
      },
    });
    return { res, email };
  };
  const verifyAndSignIn = async (email: string) => {
    const mail = await env.smtp.waitFor((m) => m.to.includes(email) && m.text.includes('/verify-email?'));
    await app.inject({
      method: 'GET',
      url: `/auth/verify-email?token=${encodeURIComponent(tokenFrom(mail, 'verify-email'))}`,
    });
    return { mail, cookie: await signIn(app, email, 'correct horse battery') };
  };
  const prefs = async (u: { cookie: string }) =>
    (
      await app.inject({ method: 'GET', url: '/notification/preferences', headers: { cookie: u.cookie } })
    ).json().preferences as { emailEnabled: boolean; emailTypes: string[]; emailDigest: string };
  const setPrefs = async (u: { cookie: string }, patch: Record<string, unknown>) => {
    const res = await app.inject({
      method: 'PATCH',
      url: '/notification/preferences',
      headers: jsonHeaders(u.cookie),
      payload: patch,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().preferences as Record<string, unknown>;
  };
  const digestRows = async (userId: string) =>
    rowsOf<{ status: string }>(
      await app.ctx.database.db.execute(sql`select status from email_digest where user_id = ${userId}`),
    );
  const waitDigestsDone = async (userId: string, count = 1) => {
    for (let i = 0; i < 400; i++) {
      const rows = await digestRows(userId);
      if (rows.length >= count && rows.every((r) => r.status !== 'pending')) return rows;
      await settle(25);
    }
    throw new Error('digest never processed');
  };
  /** Waits until the outbox has nothing pending, so "no email" is a fact and not a race. */
  const outboxIdle = async () => {
    for (let i = 0; i < 400; i++) {
      const rows = rowsOf<{ n: number }>(
        await app.ctx.database.db.execute(
          sql`select count(*)::int as n from email_outbox where status = 'pending'`,
        ),
      );
      if (Number(rows[0]?.n) === 0) return;
      await settle(25);
    }
    throw new Error('outbox never drained');
  };
  /** Waits until a fresh digest window has just begun, so a few steps fit inside one window. */
  const startOfWindow = async () => {
    while (Date.now() % WINDOW_MS > WINDOW_MS / 5) await settle(10);
  };
  const isDigest = (m: CapturedMail) => /digest|Zusammenfassung/.test(m.subject);

  beforeAll(async () => {
    overridesDir = mkdtempSync(path.join(tmpdir(), 'herald-email-'));
    env = await createTestEnv({
      APP_NAME: 'Acme',
      EMAIL_ACCENT_COLOR: '#0f766e',
      EMAIL_LOGO_URL: 'https://cdn.acme.test/logo.png',
      EMAIL_QUEUE_POLL_MS: '50',
      EMAIL_DIGEST_HOURLY_MS: String(WINDOW_MS),
      EMAIL_DIGEST_DAILY_MS: String(WINDOW_MS * 2),
    });
    app = await env.app();
  });
  afterAll(async () => {
    await env.close();
    rmSync(overridesDir, { recursive: true, force: true });
  });

  it('APP_NAME everywhere: verification, reset, magic link and notification never say Herald', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const verification = mailsTo(u.email)[0];
    expect(verification?.subject).toBe('Verify your email for Acme');

    await app.inject({
      method: 'POST',
      url: '/auth/request-password-reset',
      headers: jsonHeaders(),
      payload: { email: u.email },
    });
    const reset = await env.smtp.waitFor(
      (m) => m.to.includes(u.email) && m.text.includes('/reset-password?'),
    );
    await app.inject({
      method: 'POST',
      url: '/auth/sign-in/magic-link',
      headers: jsonHeaders(),
      payload: { email: u.email },
    });
    const magic = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.text.includes('/magic-link?'));
    await app.notifications.createForUser(u.id, { type: 'mention', title: 'Ping', content: 'hello' });
    const note = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject === 'Ping');

    for (const mail of [verification, reset, magic, note]) {
      if (!mail) throw new Error('mail missing');
      expect(everywhere(mail)).not.toMatch(/herald/i);
      expect(mail.from).toMatch(/^"?Acme"? <no-reply@localhost>$/);
      // Both parts, each a whole email: the brand, the logo and accent in HTML, the link in both.
      expect(mail.text).toContain('Acme');
      expect(mail.html).toContain('https://cdn.acme.test/logo.png');
      expect(mail.html).toContain('#0f766e');
      expect(mail.html).toContain('<meta name="color-scheme" content="light dark">');
      expect(mail.headers['content-language']).toBe('en');
    }
    expect(reset.subject).toBe('Reset your Acme password');
    expect(magic.subject).toBe('Your Acme sign-in link');
    // better-auth's own appName follows APP_NAME.
    expect((await app.ctx.auth.$context).appName).toBe('Acme');
  });

  it('notification emails escape user text in HTML and keep it verbatim in the text part', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    await app.notifications.createForUser(u.id, {
      type: 'mention',
      title: 'Hi <b>there</b> "x"',
      content: '<script>alert(1)</script> & {{appName}}',
    });
    const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject.includes('there'));
    expect(mail.subject).toBe('Hi <b>there</b> "x"');
    expect(mail.html).not.toContain('<script>');
    expect(mail.html).not.toContain('<b>there');
    expect(mail.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; {{appName}}');
    expect(mail.text).toContain('<script>alert(1)</script> & {{appName}}');
  });

  it('one ban rule: a notification is emailed once a temporary ban has expired, never while a ban is in force', async () => {
    const [expired, inForce] = await Promise.all([
      createVerifiedUser(app, env.smtp),
      createVerifiedUser(app, env.smtp),
    ]);
    // As better-auth leaves them until the user's next sign-in: the flag still set, the expiry past or future.
    await app.ctx.database.db.execute(
      sql`update "user" set banned = true, ban_expires = now() - interval '1 minute' where id = ${expired.id}`,
    );
    await app.ctx.database.db.execute(
      sql`update "user" set banned = true, ban_expires = now() + interval '1 hour' where id = ${inForce.id}`,
    );
    for (const u of [expired, inForce]) {
      await app.notifications.createForUser(u.id, {
        type: 'mention',
        title: `ban rule ${u.id}`,
        content: 'x',
      });
    }
    await env.smtp.waitFor((m) => m.to.includes(expired.email) && m.subject === `ban rule ${expired.id}`);
    await outboxIdle();
    expect(mailsTo(inForce.email).filter((m) => m.subject.startsWith('ban rule'))).toEqual([]);
  });

  it('locale: German for a de user, en for an unknown one, invalid tags refused, update-user normalises', async () => {
    const de = await signUp({ locale: 'de' });
    expect(de.res.statusCode, de.res.body).toBe(200);
    const { mail: deMail, cookie } = await verifyAndSignIn(de.email);
    expect(deMail.subject).toBe('Bestätige deine E-Mail-Adresse für Acme');
    expect(deMail.text).toContain('E-Mail-Adresse bestätigen');
    expect(deMail.headers['content-language']).toBe('de');
    expect(everywhere(deMail)).not.toMatch(/herald/i);

    const xx = await signUp({ locale: 'xx' });
    expect(xx.res.statusCode).toBe(200);
    const { mail: xxMail } = await verifyAndSignIn(xx.email);
    expect(xxMail.subject).toBe('Verify your email for Acme');
    expect(xxMail.headers['content-language']).toBe('en');

    for (const bad of ['not a locale', 'x', 42, 'e'.repeat(40)]) {
      const res = (await signUp({ locale: bad })).res;
      expect(res.statusCode, String(bad)).toBe(400);
    }

    // update-user: normalised to canonical case; the next email follows it.
    const update = await app.inject({
      method: 'POST',
      url: '/auth/update-user',
      headers: { ...jsonHeaders(cookie), origin: TEST_ORIGIN },
      payload: { locale: 'en-gb' },
    });
    expect(update.statusCode, update.body).toBe(200);
    const session = await app.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie } });
    expect(session.json().user.locale).toBe('en-GB');
    const id = session.json().user.id as string;
    await app.notifications.createForUser(id, { type: 'mention', title: 'after update', content: 'x' });
    const note = await env.smtp.waitFor((m) => m.to.includes(de.email) && m.subject === 'after update');
    expect(note.headers['content-language']).toBe('en');
    const refused = await app.inject({
      method: 'POST',
      url: '/auth/update-user',
      headers: { ...jsonHeaders(cookie), origin: TEST_ORIGIN },
      payload: { locale: '../../etc' },
    });
    expect(refused.statusCode).toBe(400);
  });

  describe('one-click unsubscribe', () => {
    let u: TestUser;
    let link: string;

    beforeAll(async () => {
      u = await createVerifiedUser(app, env.smtp);
      await app.notifications.createForUser(u.id, { type: 'mention', title: 'unsub me', content: 'x' });
      const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject === 'unsub me');
      expect(mail.headers['list-unsubscribe-post']).toBe('List-Unsubscribe=One-Click');
      const match = /^<(http:\/\/localhost:3001\/notification\/unsubscribe\?token=[A-Za-z0-9_.-]+)>$/.exec(
        mail.headers['list-unsubscribe'] ?? '',
      );
      expect(match, mail.headers['list-unsubscribe']).not.toBeNull();
      link = match?.[1] ?? '';
      // The same link in both parts, for people who read the email.
      expect(mail.text).toContain(link);
      expect(mail.html).toContain(link);
    });
    const pathOf = (url: string) => url.replace('http://localhost:3001', '');

    it('GET redirects to the web app’s confirmation page and changes nothing', async () => {
      const res = await app.inject({ method: 'GET', url: pathOf(link) });
      expect(res.statusCode).toBe(303);
      expect(res.headers.location).toBe(`${TEST_ORIGIN}/unsubscribe?token=${link.split('token=')[1]}`);
      expect((await prefs(u)).emailTypes).toContain('mention');
    });

    it('refuses tampered, expired, missing and foreign-purpose tokens in the contract’s error shape', async () => {
      const token = link.split('token=')[1] ?? '';
      const [body, sig] = token.split('.') as [string, string];
      const flipped = `${body}.${sig.startsWith('A') ? 'B' : 'A'}${sig.slice(1)}`;
      // The payload rewritten to another user, with the original signature.
      const other = Buffer.from(
        JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), u: 'someone-else' }),
      ).toString('base64url');
      const expired = createUnsubscribeTokens(TEST_AUTH_SECRET, () => Date.now() - 365 * 86_400_000).sign({
        userId: u.id,
        scope: 'all',
      });
      const foreign = createUnsubscribeTokens('another-secret-another-secret-another-secret').sign({
        userId: u.id,
        scope: 'all',
      });
      const cases: Array<[string, number, string]> = [
        [flipped, 400, 'INVALID_UNSUBSCRIBE_TOKEN'],
        [`${other}.${sig}`, 400, 'INVALID_UNSUBSCRIBE_TOKEN'],
        ['garbage', 400, 'INVALID_UNSUBSCRIBE_TOKEN'],
        [foreign, 400, 'INVALID_UNSUBSCRIBE_TOKEN'],
        [expired, 410, 'UNSUBSCRIBE_TOKEN_EXPIRED'],
        ['x'.repeat(2000), 400, 'VALIDATION_ERROR'],
      ];
      for (const [t, status, code] of cases) {
        const res = await app.inject({
          method: 'POST',
          url: `/notification/unsubscribe?token=${t}`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'List-Unsubscribe=One-Click',
        });
        expect(res.statusCode, t.slice(0, 20)).toBe(status);
        expect(res.json().code).toBe(code);
      }
      const missing = await app.inject({ method: 'POST', url: '/notification/unsubscribe' });
      expect(missing.statusCode).toBe(400);
      expect(missing.json().code).toBe('VALIDATION_ERROR');
      const wrongType = await app.inject({
        method: 'POST',
        url: pathOf(link),
        headers: { 'content-type': 'text/plain' },
        payload: 'List-Unsubscribe=One-Click',
      });
      expect(wrongType.statusCode).toBe(415);
      const tooBig = await app.inject({
        method: 'POST',
        url: pathOf(link),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `List-Unsubscribe=One-Click&x=${'a'.repeat(10_000)}`,
      });
      expect(tooBig.statusCode).toBe(413);
      expect((await prefs(u)).emailTypes).toContain('mention');
    });

    it('POST with RFC 8058’s form body, no cookie and no Origin removes exactly that type', async () => {
      const before = await prefs(u);
      const res = await app.inject({
        method: 'POST',
        url: pathOf(link),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'List-Unsubscribe=One-Click',
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ unsubscribed: true, scope: 'type', type: 'mention' });
      const after = await prefs(u);
      expect(after.emailTypes).toEqual(before.emailTypes.filter((t) => t !== 'mention'));
      expect(after.emailEnabled).toBe(true);
      // Repeating it (providers retry) is harmless; a cookie from a foreign origin grants and blocks nothing.
      const again = await app.inject({
        method: 'POST',
        url: pathOf(link),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          cookie: u.cookie,
          origin: 'https://evil.example',
        },
        payload: 'List-Unsubscribe=One-Click',
      });
      expect(again.statusCode).toBe(200);
      expect((await prefs(u)).emailTypes).toEqual(after.emailTypes);
      // And it works: the next mention is not emailed.
      await app.notifications.createForUser(u.id, { type: 'mention', title: 'not emailed', content: 'x' });
      await outboxIdle();
      expect(mailsTo(u.email).some((m) => m.subject === 'not emailed')).toBe(false);
    });
  });

  it('a notification to many users: one stored body per locale, every recipient their own link', async () => {
    const en = await Promise.all([0, 1, 2].map(() => createVerifiedUser(app, env.smtp)));
    const de = await signUp({ locale: 'de' });
    const { cookie: deCookie } = await verifyAndSignIn(de.email);
    const deId = (
      await app.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: deCookie } })
    ).json().user.id as string;
    const recipients = [...en.map((u) => ({ id: u.id, email: u.email })), { id: deId, email: de.email }];
    const title = `stored once ${Date.now()}`;
    await app.notifications.createForUsers(
      recipients.map((r) => r.id),
      { type: 'announcement', title, content: 'Read <b>this</b> & that' },
    );
    const tokens = createUnsubscribeTokens(TEST_AUTH_SECRET);
    const marked: string[] = [];
    for (const r of recipients) {
      const mail = await env.smtp.waitFor((m) => m.to.includes(r.email) && m.subject === title);
      const link = /^<([^>]+)>$/.exec(mail.headers['list-unsubscribe'] ?? '')?.[1] ?? '';
      // This recipient's link, for this type, in both parts.
      expect(tokens.verify(link.split('token=')[1] ?? '')).toEqual({
        ok: true,
        target: { userId: r.id, scope: 'type', type: 'announcement' },
      });
      expect(mail.text).toContain(link);
      expect(mail.html).toContain(link);
      expect(mail.html).toContain('Read &lt;b&gt;this&lt;/b&gt; &amp; that');
      if (r.id === deId) expect(mail.headers['content-language']).toBe('de');
      else marked.push(mail.html.replaceAll(link, 'LINK'));
    }
    // Apart from the link, the English recipients got the same email.
    expect(new Set(marked).size).toBe(1);
    const [row] = rowsOf<{ n: number }>(
      await app.ctx.database.db.execute(
        sql`select count(*)::int as n from email_body where subject = ${title}`,
      ),
    );
    expect(row?.n).toBe(2);
  });

  describe('digests', () => {
    it('one digest per window listing the notifications still unread, newest first', async () => {
      const u = await createVerifiedUser(app, env.smtp);
      expect((await prefs(u)).emailDigest).toBe('off');
      expect((await setPrefs(u, { emailDigest: 'hourly' })).emailDigest).toBe('hourly');
      const bad = await app.inject({
        method: 'PATCH',
        url: '/notification/preferences',
        headers: jsonHeaders(u.cookie),
        payload: { emailDigest: 'weekly' },
      });
      expect(bad.statusCode).toBe(400);

      await startOfWindow();
      const a = await app.notifications.createForUser(u.id, {
        type: 'mention',
        title: 'first <one>',
        content: 'a',
      });
      const b = await app.notifications.createForUser(u.id, {
        type: 'warning',
        title: 'second',
        content: 'b',
      });
      await app.notifications.createForUser(u.id, { type: 'announcement', title: 'third', content: 'c' });
      // Read inside the window: left out of the digest.
      const read = await app.inject({
        method: 'PATCH',
        url: `/notification/${b.id}/read`,
        headers: jsonHeaders(u.cookie),
        payload: { read: true },
      });
      expect(read.statusCode).toBe(200);
      // Nothing was emailed one by one.
      expect(mailsTo(u.email).filter((m) => !m.subject.startsWith('Verify'))).toEqual([]);

      const digest = await env.smtp.waitFor((m) => m.to.includes(u.email) && isDigest(m), 15_000);
      expect(digest.subject).toBe('Your Acme digest: 2 unread notifications');
      expect(everywhere(digest)).not.toMatch(/herald/i);
      expect(digest.text.indexOf('third')).toBeLessThan(digest.text.indexOf('first <one>'));
      expect(digest.text).not.toContain('second');
      expect(digest.html).toContain('first &lt;one&gt;');
      expect(digest.headers['list-unsubscribe-post']).toBe('List-Unsubscribe=One-Click');
      expect(a.id).toBeTruthy();

      await waitDigestsDone(u.id);
      await outboxIdle();
      expect(mailsTo(u.email).filter(isDigest)).toHaveLength(1);

      // The digest's link turns every email off (scope all).
      const link = /<([^>]+)>/.exec(digest.headers['list-unsubscribe'] ?? '')?.[1] ?? '';
      const res = await app.inject({
        method: 'POST',
        url: link.replace('http://localhost:3001', ''),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'List-Unsubscribe=One-Click',
      });
      expect(res.json()).toEqual({ unsubscribed: true, scope: 'all', type: null });
      expect((await prefs(u)).emailEnabled).toBe(false);
    });

    it('nothing is sent when everything was read in time, nor to a user banned meanwhile', async () => {
      const reader = await createVerifiedUser(app, env.smtp);
      const banned = await createVerifiedUser(app, env.smtp);
      await setPrefs(reader, { emailDigest: 'daily' });
      await setPrefs(banned, { emailDigest: 'hourly' });
      await startOfWindow();
      await app.notifications.createForUser(reader.id, { type: 'mention', title: 'r1', content: 'x' });
      await app.notifications.createForUser(reader.id, { type: 'warning', title: 'r2', content: 'x' });
      await app.notifications.createForUser(banned.id, { type: 'mention', title: 'b1', content: 'x' });
      const all = await app.inject({
        method: 'PATCH',
        url: '/notification/mark-all-read',
        headers: { cookie: reader.cookie },
      });
      expect(all.json().updatedCount).toBe(2);
      await app.ctx.database.db.execute(sql`update "user" set banned = true where id = ${banned.id}`);

      expect(await waitDigestsDone(reader.id)).toEqual([{ status: 'empty' }]);
      expect(await waitDigestsDone(banned.id)).toEqual([{ status: 'skipped' }]);
      await outboxIdle();
      expect(mailsTo(reader.email).filter((m) => !m.subject.startsWith('Verify'))).toEqual([]);
      expect(mailsTo(banned.email).filter((m) => !m.subject.startsWith('Verify'))).toEqual([]);
    });

    it('a broadcast schedules the digests of a whole batch in one statement, without emails one by one', async () => {
      const users = await Promise.all([0, 1, 2].map(() => createVerifiedUser(app, env.smtp)));
      for (const u of users) await setPrefs(u, { emailDigest: 'hourly' });
      await startOfWindow();
      const statements: string[] = [];
      const db = app.ctx.database.db;
      const original = db.execute.bind(db);
      // Observation only (the statement still runs): how many digest inserts one batch costs.
      db.execute = ((q: Parameters<typeof original>[0]) => {
        const text = JSON.stringify(q);
        if (text.includes('insert into email_digest')) statements.push(text);
        return original(q);
      }) as typeof db.execute;
      try {
        await app.notifications.createForUsers(
          users.map((u) => u.id),
          { type: 'announcement', title: 'to all', content: 'x' },
        );
      } finally {
        db.execute = original;
      }
      expect(statements).toHaveLength(1);
      for (const u of users) {
        await env.smtp.waitFor((m) => m.to.includes(u.email) && isDigest(m), 15_000);
      }
    });
  });

  describe('template overrides (EMAIL_TEMPLATES_DIR)', () => {
    it('an override of the same name is used, per locale or for all', async () => {
      const dir = path.join(overridesDir, 'good');
      const { mkdirSync } = await import('node:fs');
      mkdirSync(dir);
      writeFileSync(path.join(dir, 'notification.txt'), 'CUSTOM {{appName}}: {{title}} / {{content}}\n');
      writeFileSync(path.join(dir, 'notification.de.subject.txt'), 'Neu bei {{appName}}: {{title}}');
      writeFileSync(path.join(dir, '.DS_Store'), 'ignored');
      const custom = await env.app({ EMAIL_TEMPLATES_DIR: dir });
      const u = await createVerifiedUser(custom, env.smtp);
      await custom.notifications.createForUser(u.id, { type: 'mention', title: 'ov <1>', content: 'body' });
      const mail = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject === 'ov <1>');
      expect(mail.text).toContain('CUSTOM Acme: ov <1> / body');
      // The HTML part was not overridden: still the bundled template.
      expect(mail.html).toContain('ov &lt;1&gt;');
      await custom.ctx.database.db.execute(sql`update "user" set locale = 'de' where id = ${u.id}`);
      await custom.notifications.createForUser(u.id, { type: 'mention', title: 'ov 2', content: 'body' });
      const de = await env.smtp.waitFor((m) => m.to.includes(u.email) && m.subject.includes('ov 2'));
      expect(de.subject).toBe('Neu bei Acme: ov 2');
    });

    it('an unknown name, a syntax error or an unknown variable refuses to start, naming the file', async () => {
      const cases: Array<[string, string, RegExp]> = [
        ['welcome.html', '<p>hi</p>', /welcome\.html: unknown template file/],
        ['digest.fr.html', '<p>hi</p>', /digest\.fr\.html: unknown template file/],
        ['layout.subject.txt', 'x', /layout\.subject\.txt: unknown template file/],
        ['magic-link.html', '{{#if url}}<a>', /magic-link\.html/],
        ['verify-email.txt', 'Hello {{userName}}', /verify-email\.txt: .*userName/],
      ];
      for (const [file, content, message] of cases) {
        const dir = mkdtempSync(path.join(overridesDir, 'bad-'));
        writeFileSync(path.join(dir, file), content);
        const error = await buildApp(env.config({ EMAIL_TEMPLATES_DIR: dir })).catch((e: unknown) => e);
        expect(error, file).toBeInstanceOf(ConfigError);
        expect((error as Error).message).toMatch(message);
      }
    });

    it('the server process exits at start-up with a message naming the broken file', async () => {
      const dir = mkdtempSync(path.join(overridesDir, 'proc-'));
      writeFileSync(path.join(dir, 'digest.html'), '{{#each items}}<p>{{title}}</p>');
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
        cwd: SERVER_DIR,
        env: { ...env.baseEnv, PATH: process.env.PATH ?? '', PORT: '0', EMAIL_TEMPLATES_DIR: dir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => {
        stderr += c.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(code).toBe(1);
      expect(stderr).toContain(path.join(dir, 'digest.html'));
      // A cold tsx start of the whole server on a loaded 2-core machine.
    }, 180_000);
  });
});
