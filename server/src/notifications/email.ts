// Owns the notification email's content; sending goes through the shared outbox (infra/email-outbox.ts).
import { escapeHtml, type Mail, safeSubject } from '../infra/mailer.js';

/**
 * The notification email: escaped HTML, a plain-text part, and a link to the notifications page. It does not
 * depend on the recipient, so a broadcast renders it once for every address.
 */
export function notificationEmail(params: {
  title: string;
  content: string;
  feBaseUrl: string;
}): Omit<Mail, 'to'> {
  const link = `${params.feBaseUrl}/notifications`;
  const subject = safeSubject(params.title);
  return {
    subject,
    text: `${params.title}\n\n${params.content}\n\nView your notifications: ${link}\n`,
    html:
      '<!doctype html><html><body style="font-family:sans-serif">' +
      `<h2 style="font-size:18px">${escapeHtml(params.title)}</h2>` +
      `<p style="white-space:pre-wrap">${escapeHtml(params.content)}</p>` +
      `<p><a href="${escapeHtml(link)}">View your notifications</a></p>` +
      '</body></html>',
  };
}
