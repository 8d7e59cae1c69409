// The outbox's one-body-many-recipients queue (enqueueForRecipients): the body is stored once and each recipient's
// fills are spliced in when the row is claimed. What reaches the SMTP server must be exactly what the per-email
// queue sends for the same emails rendered up front, whatever characters the body and the fills hold; the body is
// one row, and housekeeping removes it only once no row refers to it.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import type { TemplateEmail, TemplateRecipient } from '../../src/infra/email-outbox.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

const PH = 'x-test-placeholder-7c1e';
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('email outbox: one body for many recipients', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    env = await createTestEnv({ EMAIL_QUEUE_POLL_MS: '50' });
    app = await env.app();
  });
  afterAll(async () => {
    await env.close();
  });

  const template: TemplateEmail = {
    subject: 'Quotes "q", back\\slash, {braces}, commas, NULL',
    text: `line 1 ${PH}\nline "2" \\ {a,b} ${PH}\ttab ü € 🎉 NULL`,
    html: `<p class="a">${PH}</p><a href="${PH}">x</a>\n<p>\\"{}",</p><p>ü € 🎉</p>`,
    headers: { 'List-Unsubscribe': `<${PH}>`, 'Content-Language': 'de' },
    placeholder: PH,
  };
  const fills = [
    'https://api.example.test/notification/unsubscribe?token=abc.def',
    'https://h.test/u?a="q"&b=\\back\\slash,{x}',
    'https://h.test/ü€?NULL',
  ];
  const db = () => app.ctx.database.db;

  it('sends what the per-email queue sends, from one stored body', async () => {
    const stamp = Date.now();
    const recipients: TemplateRecipient[] = fills.map((fill, i) => ({
      dedupeKey: `tmpl:${stamp}:a${i}`,
      to: `a${i}.${stamp}@example.test`,
      fillText: fill,
      fillHtml: fill.replaceAll('&', '&amp;').replaceAll('"', '&quot;'),
    }));
    const { outbox } = app.ctx;
    expect(await outbox.enqueueForRecipients(template, recipients)).toBe(fills.length);
    // Again: every dedupe key is taken, nothing is queued twice.
    expect(await outbox.enqueueForRecipients(template, recipients)).toBe(0);
    expect(await outbox.enqueueForRecipients(template, [])).toBe(0);
    const rendered = recipients.map((r, i) => ({
      dedupeKey: `tmpl:${stamp}:b${i}`,
      to: `b${i}.${stamp}@example.test`,
      subject: template.subject,
      text: template.text.replaceAll(PH, r.fillText),
      html: template.html.replaceAll(PH, r.fillHtml),
      headers: Object.fromEntries(
        Object.entries(template.headers ?? {}).map(([k, v]) => [k, v.replaceAll(PH, r.fillText)]),
      ),
    }));
    expect(await outbox.enqueue(rendered)).toBe(fills.length);

    // Stored once: the rows hold no body of their own, and they all point at one body row.
    const stored = rowsOf<{
      body_id: string | null;
      html_body: string;
      text_body: string;
      to_address: string;
      recipient: string;
    }>(
      await db().execute(sql`select body_id::text as body_id, html_body, text_body, to_address, recipient
        from email_outbox where dedupe_key like ${`tmpl:${stamp}:a%`} order by dedupe_key`),
    );
    expect(stored).toHaveLength(fills.length);
    expect(new Set(stored.map((r) => r.body_id)).size).toBe(1);
    expect(stored[0]?.body_id).not.toBeNull();
    for (const [i, r] of stored.entries()) {
      expect([r.html_body, r.text_body, r.to_address]).toEqual(['', '', '']);
      expect(r.recipient).toBe(recipients[i]?.to);
    }
    // The row's own columns name no recipient, so a version before email_body claiming it in a rolling upgrade
    // fails that attempt (the row is retried) instead of sending an empty email: the mailer refuses it.
    await expect(
      app.ctx.mailer.send({ to: stored[0]?.to_address ?? '', subject: '', text: '', html: '' }),
    ).rejects.toThrow();

    const sent = async (side: 'a' | 'b', i: number) => {
      const m = await env.smtp.waitFor((x) => x.to.includes(`${side}${i}.${stamp}@example.test`));
      return {
        subject: m.subject,
        text: m.text,
        html: m.html,
        unsubscribe: m.headers['list-unsubscribe'],
        language: m.headers['content-language'],
      };
    };
    for (let i = 0; i < fills.length; i++) {
      const a = await sent('a', i);
      expect(a).toEqual(await sent('b', i));
      // (Headers with odd characters arrive MIME-encoded; the plain link arrives as it is.)
      if (i === 0) expect(a.unsubscribe).toBe(`<${fills[0]}>`);
      expect(JSON.stringify(a)).not.toContain(PH);
    }
  });

  it('housekeeping removes a body once no row refers to it; a row whose body is gone fails without a crash', async () => {
    const body = async (ageHours: number) =>
      rowsOf<{ id: string }>(
        await db().execute(sql`insert into email_body (subject, text_body, html_body, placeholder, created_at)
          values ('hk', 'PH', '<p>PH</p>', 'PH', now() - make_interval(hours => ${ageHours})) returning id::text`),
      )[0]?.id ?? '';
    const orphanOld = await body(2);
    const orphanFresh = await body(0);
    const referencedOld = await body(2);
    await db().execute(sql`insert into email_outbox (dedupe_key, to_address, subject, text_body, html_body,
        body_id, fill_text, fill_html, status)
      values (${`hk:${referencedOld}`}, 'hk@example.test', '', '', '', ${referencedOld}::bigint, 'x', 'x', 'sent')`);
    const result = await app.ctx.housekeeping.runOnce();
    expect(result.emailBodiesDeleted).toBeGreaterThanOrEqual(1);
    const left = rowsOf<{ id: string }>(
      await db().execute(sql`select id::text from email_body where subject = 'hk'`),
    ).map((r) => r.id);
    expect(left).not.toContain(orphanOld);
    expect(left).toEqual(expect.arrayContaining([orphanFresh, referencedOld]));

    // Nothing deletes a referenced body; this row's never existed. It is a failed attempt with a reason, retried
    // later, and the worker goes on sending the others.
    const key = `hk:missing:${Date.now()}`;
    await db().execute(sql`insert into email_outbox (dedupe_key, to_address, subject, text_body, html_body,
        body_id, fill_text, fill_html)
      values (${key}, 'missing@example.test', '', '', '', 9007199254740991, 'x', 'x')`);
    app.ctx.outbox.kick();
    let row: { status: string; last_error: string | null } | undefined;
    for (let i = 0; i < 200 && !row?.last_error; i++) {
      await settle(25);
      row = rowsOf<{ status: string; last_error: string | null }>(
        await db().execute(sql`select status, last_error from email_outbox where dedupe_key = ${key}`),
      )[0];
    }
    expect(row?.last_error).toBe('the email body of this row is gone');
    const after = `after-${Date.now()}@example.test`;
    await app.ctx.outbox.enqueue([
      { dedupeKey: `hk:after:${Date.now()}`, to: after, subject: 'after', text: 'x', html: '<p>x</p>' },
    ]);
    await env.smtp.waitFor((m) => m.to.includes(after));
  });
});
