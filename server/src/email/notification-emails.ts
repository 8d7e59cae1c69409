// Owns turning one notification into emails: recipients who chose a digest get a digest entry scheduled (in one
// statement per batch), the others one email each: rendered once per locale and stored once (email_body), each
// recipient's own unsubscribe link spliced in when the outbox sends it.
import type { EmailOutbox, TemplateRecipient } from '../infra/email-outbox.js';
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
  outbox: Pick<EmailOutbox, 'enqueueForRecipients'>;
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

      // Rendered once per locale with a placeholder for the unsubscribe link and queued with enqueueForRecipients:
      // the outbox stores the body once per chunk and splices each recipient's own link in when it sends.
      const byLocale = new Map<ShippedLocale, { base: RenderedEmail; recipients: TemplateRecipient[] }>();
      for (const r of immediate) {
        const locale = deps.renderer.localeOf(r.locale);
        let group = byLocale.get(locale);
        if (!group) {
          const base = deps.renderer.render(
            { template: 'notification', ...content, unsubscribeUrl: SENTINEL },
            locale,
          );
          group = { base, recipients: [] };
          byLocale.set(locale, group);
        }
        const url = unsubscribeUrl(
          deps.apiBaseUrl,
          deps.tokens.sign({ userId: r.userId, scope: 'type', type: content.type }),
        );
        group.recipients.push({
          dedupeKey: `notification:${r.notificationId}`,
          to: r.email,
          fillText: url,
          fillHtml: escapeHtml(url),
        });
      }
      for (const { base, recipients } of byLocale.values()) {
        const email = {
          subject: base.subject,
          text: base.text,
          html: base.html,
          headers: base.headers,
          placeholder: SENTINEL,
        };
        for (let i = 0; i < recipients.length; i += INSERT_CHUNK) {
          await deps.outbox.enqueueForRecipients(email, recipients.slice(i, i + INSERT_CHUNK));
        }
      }
    },
  };
}
