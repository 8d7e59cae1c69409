// Auth emails: escaped HTML plus a text part, through real SMTP; without SMTP the link is logged in development
// and never in production (a warning instead).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { actionEmail, createMailer, escapeHtml, safeSubject } from '../../src/infra/mailer.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { captureLogger } from '../helpers/logs.js';
import { jsonHeaders, uniqueEmail } from '../helpers/users.js';

describe('auth emails over SMTP', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
  });
  afterAll(() => env.close());

  it('never echoes user-chosen text to an unverified address; sends HTML and a text part', async () => {
    const email = uniqueEmail();
    const name = '<script>alert("x")</script> & "Co"';
    const res = await app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      headers: jsonHeaders(),
      payload: { email, password: 'correct horse battery', name },
    });
    expect(res.statusCode).toBe(200);
    const mail = await env.smtp.waitFor((m) => m.to.includes(email));
    expect(mail.subject).toBe('Verify your email for Herald');
    expect(mail.html).not.toContain('<script>');
    // Anyone can type any address at sign-up: the name (escaped or not) must not reach that inbox.
    expect(mail.html).not.toContain('alert');
    expect(mail.text).not.toContain('alert');
    expect(mail.html).toMatch(new RegExp(`href="${TEST_ORIGIN}/verify-email\\?token=[^"]+"`));
    expect(mail.text).toMatch(new RegExp(`${TEST_ORIGIN}/verify-email\\?token=\\S+`));
  });
});

describe('mail helpers and the SMTP-less mailer', () => {
  it('escapes HTML and keeps subjects on one line', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(safeSubject('Hello\r\nBcc: victim@example.test')).toBe('Hello Bcc: victim@example.test');
    const mail = actionEmail({
      to: 'a@b.c',
      subject: 'Hi\nthere',
      intro: '<b>x</b>',
      actionLabel: 'Go <now>',
      url: 'https://fe.example/x?token=a"b',
    });
    expect(mail.subject).toBe('Hi there');
    expect(mail.html).toContain('&lt;b&gt;x&lt;/b&gt;');
    expect(mail.html).toContain('href="https://fe.example/x?token=a&quot;b"');
    expect(mail.html).toContain('Go &lt;now&gt;');
    expect(mail.text).toContain('Go <now>: https://fe.example/x?token=a"b');
  });

  const mail = actionEmail({
    to: 'someone@example.test',
    subject: 'Your Herald sign-in link',
    intro: 'Use this link.',
    actionLabel: 'Sign in',
    url: 'http://localhost:3000/magic-link?token=SECRET-TOKEN',
  });

  it('logs the link in development when SMTP is not configured', async () => {
    const { logger, lines } = captureLogger();
    const mailer = createMailer({ port: 587, secure: false, from: 'x@y.z', isProduction: false, logger });
    expect(mailer.enabled).toBe(false);
    await mailer.send(mail);
    expect(lines).toHaveLength(1);
    expect(JSON.stringify(lines[0])).toContain('magic-link?token=SECRET-TOKEN');
    expect(lines[0]?.level).toBe(30);
  });

  it('only warns in production, never logging the link', async () => {
    const { logger, lines } = captureLogger();
    const mailer = createMailer({ port: 587, secure: false, from: 'x@y.z', isProduction: true, logger });
    expect(lines.map((l) => l.msg)).toEqual([
      'SMTP_HOST is not set: email is disabled; verification and reset emails will not be sent',
    ]);
    await mailer.send(mail);
    expect(lines).toHaveLength(2);
    expect(lines.every((l) => l.level === 40)).toBe(true);
    expect(JSON.stringify(lines)).not.toContain('SECRET-TOKEN');
  });
});
