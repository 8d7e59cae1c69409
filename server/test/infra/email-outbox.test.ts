// The durable email queue every feature sends through: auth emails (verification, reset, magic link) survive an
// SMTP outage and arrive once SMTP is back; retries use exponential backoff with full jitter; queue depth and
// failures show in /metrics.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { backoffMs } from '../../src/infra/email-outbox.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { tokenFrom } from '../helpers/smtp.js';
import { jsonHeaders, signIn, uniqueEmail } from '../helpers/users.js';

const KEY = 'k'.repeat(40);

describe('backoffMs', () => {
  it('is uniform in [0, min(cap, base · 2^(attempts−1))): full jitter', () => {
    expect(backoffMs(1, 1000, () => 0)).toBe(0);
    expect(backoffMs(1, 1000, () => 0.5)).toBe(500);
    expect(backoffMs(4, 1000, () => 0.999_999)).toBe(7999);
    // Capped at one hour whatever the attempt count.
    expect(backoffMs(40, 1000, () => 0.999_999)).toBeLessThan(60 * 60 * 1000);
    expect(backoffMs(40, 1000, () => 0.999_999)).toBeGreaterThan(60 * 60 * 1000 - 10);
    const samples = Array.from({ length: 2000 }, () => backoffMs(3, 1000));
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...samples)).toBeLessThan(4000);
    // Spread over the whole range, not bunched at the ceiling (plain exponential backoff would be 4000 each).
    expect(samples.filter((s) => s < 2000).length).toBeGreaterThan(700);
    expect(samples.filter((s) => s >= 2000).length).toBeGreaterThan(700);
  });
});

describe('auth emails through the outbox', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv({
      EMAIL_QUEUE_POLL_MS: '50',
      EMAIL_RETRY_BASE_MS: '50',
      METRICS_API_KEY: KEY,
    });
    app = await env.app();
  });
  afterAll(() => env.close());

  const emailMetrics = async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/metrics',
      headers: { authorization: `Bearer ${KEY}` },
    });
    return (
      res.json() as { email: { pending: number; failed: number; sent: number; attemptFailures: number } }
    ).email;
  };

  async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await read();
      if (ok(v)) return v;
      if (Date.now() > deadline) throw new Error(`condition not met: ${JSON.stringify(v)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('SMTP down at sign-up → the email waits in the queue → SMTP back → it arrives and verifies', async () => {
    env.smtp.setFailing(true);
    const email = uniqueEmail('outage');
    const password = 'correct horse battery';
    try {
      const signUp = await app.inject({
        method: 'POST',
        url: '/auth/sign-up/email',
        headers: jsonHeaders(),
        payload: { email, password, name: 'Outage' },
      });
      expect(signUp.statusCode).toBe(200);
      // Attempts fail while SMTP refuses; the email stays pending and the failures are counted.
      const during = await until(emailMetrics, (m) => m.attemptFailures >= 2 && m.pending >= 1);
      expect(during.pending).toBeGreaterThanOrEqual(1);
      expect(env.smtp.messages.some((m) => m.to.includes(email))).toBe(false);
    } finally {
      env.smtp.setFailing(false);
    }
    const mail = await env.smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('Verify'), 20_000);
    const verify = await app.inject({
      method: 'GET',
      url: `/auth/verify-email?token=${encodeURIComponent(tokenFrom(mail, 'verify-email'))}`,
    });
    expect(verify.statusCode).toBe(200);
    expect(await signIn(app, email, password)).toBeTruthy();
    const after = await until(emailMetrics, (m) => m.pending === 0);
    expect(after.sent).toBeGreaterThanOrEqual(1);
    expect(after.failed).toBe(0);
  });

  it('magic-link emails are queued too', async () => {
    const email = uniqueEmail('queued');
    env.smtp.setFailing(true);
    try {
      await app.inject({
        method: 'POST',
        url: '/auth/sign-in/magic-link',
        headers: jsonHeaders(),
        payload: { email },
      });
      await until(
        () => app.ctx.outbox.stats(),
        (s) => s.pending >= 1,
      );
    } finally {
      env.smtp.setFailing(false);
    }
    const mail = await env.smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('sign-in'), 20_000);
    expect(tokenFrom(mail, 'magic-link')).toBeTruthy();
  });
});
