// Owns turning one notification into emails: recipients who chose a digest get a digest entry scheduled (in one
// statement per batch), the others one email each, rendered once per locale with their own unsubscribe link
// spliced in, queued through the outbox in multi-row inserts.
import type { EmailOutbox, OutboxEmail } from '../infra/email-outbox.js';
import { escapeHtml } from '../infra/mailer.js';
import type { NotificationEmails } from '../notifications/delivery.js';
import type { EmailRecipient } from '../notifications/repository.js';
import type { DigestScheduler } from './digest.js';
import type { ShippedLocale } from './locales.js';
import type { EmailRenderer, RenderedEmail } from './renderer.js';
import { type UnsubscribeTokens, unsubscribeUrl } from './tokens.js';

/** Stands in for the per-recipient unsubscribe URL while a locale's email is rendered once (no HTML-special characters). */
const SENTINEL = 'x-herald-unsubscribe-url-4f0c2d';
const INSERT_CHUNK = 1_000;

export function createNotificationEmails(deps: {
  renderer: EmailRenderer;
  tokens: UnsubscribeTokens;
  outbox: Pick<EmailOutbox, 'enqueue'>;
  digests: DigestScheduler;
  apiBaseUrl: string;
}): NotificationEmails {
  return {
    async queue(recipients, content) {
      const digested: EmailRecipient[] = [];
      const immediate: EmailRecipient[] = [];
      for (const r of recipients) (r.digest === 'off' ? immediate : digested).push(r);
      if (digested.length > 0) await deps.digests.schedule(digested);
      if (immediate.length === 0) return;

      const byLocale = new Map<ShippedLocale, RenderedEmail>();
      const emails: OutboxEmail[] = immediate.map((r) => {
        const locale = deps.renderer.localeOf(r.locale);
        let base = byLocale.get(locale);
        if (!base) {
          base = deps.renderer.render(
            { template: 'notification', ...content, unsubscribeUrl: SENTINEL },
            locale,
          );
          byLocale.set(locale, base);
        }
        const url = unsubscribeUrl(
          deps.apiBaseUrl,
          deps.tokens.sign({ userId: r.userId, scope: 'type', type: content.type }),
        );
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(base.headers))
          headers[name] = value.replaceAll(SENTINEL, url);
        return {
          dedupeKey: `notification:${r.notificationId}`,
          to: r.email,
          subject: base.subject,
          text: base.text.replaceAll(SENTINEL, url),
          html: base.html.replaceAll(SENTINEL, escapeHtml(url)),
          headers,
        };
      });
      for (let i = 0; i < emails.length; i += INSERT_CHUNK) {
        await deps.outbox.enqueue(emails.slice(i, i + INSERT_CHUNK));
      }
    },
  };
}
