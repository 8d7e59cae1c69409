// The outbox's one-body-many-recipients insert (enqueueForRecipients): PostgreSQL splices each recipient's fills
// into the body, and the rows it stores must be exactly the ones the per-email insert stores for the same emails
// rendered in Node, whatever characters the body and the fills hold.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import type { TemplateEmail, TemplateRecipient } from '../../src/infra/email-outbox.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

const PH = 'x-test-placeholder-7c1e';

describe('email outbox: one body for many recipients', () => {
  let env: TestEnv;
  let app: App;
  beforeAll(async () => {
    // A poll of an hour: the rows stay pending while they are compared.
    env = await createTestEnv({ EMAIL_QUEUE_POLL_MS: '3600000' });
    app = await env.app();
  });
  afterAll(async () => {
    await env.close();
  });

  const template: TemplateEmail = {
    subject: 'Über "quotes", back\\slash, {braces}, commas, NULL',
    text: `line 1 ${PH}\nline "2" \\ {a,b} ${PH}\ttab ü € 🎉 NULL`,
    html: `<p class="a">${PH}</p><a href="${PH}">x</a>\n<p>\\"{}",</p>`,
    headers: { 'List-Unsubscribe': `<${PH}>`, 'Content-Language': 'de', 'X-Odd': `"${PH}" \\ ü` },
    placeholder: PH,
  };
  const fills = [
    'https://api.example.test/notification/unsubscribe?token=abc.def',
    'https://h.test/u?a="q"&b=\\back\\slash,{x}',
    'ü€🎉 NULL \n new line',
    '',
  ];

  it('stores the rows the per-email insert stores, once per dedupe key', async () => {
    const stamp = Date.now();
    const recipients: TemplateRecipient[] = fills.map((fill, i) => ({
      dedupeKey: `tmpl:${stamp}:a${i}`,
      to: `r${i}"@example.test`,
      fillText: fill,
      fillHtml: fill.replaceAll('&', '&amp;').replaceAll('"', '&quot;'),
    }));
    const { outbox } = app.ctx;
    expect(await outbox.enqueueForRecipients(template, recipients)).toBe(fills.length);
    // Again: every dedupe key is taken.
    expect(await outbox.enqueueForRecipients(template, recipients)).toBe(0);
    expect(await outbox.enqueueForRecipients(template, [])).toBe(0);

    const rendered = recipients.map((r, i) => ({
      dedupeKey: `tmpl:${stamp}:b${i}`,
      to: r.to,
      subject: template.subject,
      text: template.text.replaceAll(PH, r.fillText),
      html: template.html.replaceAll(PH, r.fillHtml),
      headers: Object.fromEntries(
        Object.entries(template.headers ?? {}).map(([k, v]) => [k, v.replaceAll(PH, r.fillText)]),
      ),
    }));
    expect(await outbox.enqueue(rendered)).toBe(fills.length);

    const rows = rowsOf<{
      key: string;
      to_address: string;
      subject: string;
      text_body: string;
      html_body: string;
      headers: Record<string, string>;
    }>(
      await app.ctx.database.db.execute(sql`select dedupe_key as key, to_address, subject, text_body, html_body,
          headers from email_outbox where dedupe_key like ${`tmpl:${stamp}:%`} order by dedupe_key`),
    );
    expect(rows).toHaveLength(fills.length * 2);
    const pick = (side: 'a' | 'b') =>
      rows.filter((r) => r.key.startsWith(`tmpl:${stamp}:${side}`)).map(({ key: _key, ...rest }) => rest);
    expect(pick('a')).toEqual(pick('b'));
    // And the splice happened: no placeholder is left, each fill is where it belongs.
    for (const [i, row] of pick('a').entries()) {
      expect(JSON.stringify(row)).not.toContain(PH);
      expect(row.headers['List-Unsubscribe']).toBe(`<${fills[i]}>`);
    }
  });
});
