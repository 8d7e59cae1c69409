// Owns outgoing email: nodemailer over SMTP_*; without SMTP the message is logged in development only.
import nodemailer from 'nodemailer';
import type { Logger } from './logger.js';
import { withTimeout } from './timeout.js';

export interface Mail {
  to: string;
  subject: string;
  text: string;
  html: string;
  /** Extra headers: Content-Language, List-Unsubscribe(-Post) (email/renderer.ts). */
  headers?: Record<string, string>;
}

export interface Mailer {
  /** False when no SMTP server is configured (development logs the mail; production drops it with a warning). */
  enabled: boolean;
  send(mail: Mail): Promise<void>;
  /** Connects and logs in once without sending (start-up check); rejects with the server's or network's error. */
  verify(): Promise<void>;
  close(): void;
}

export interface MailerOptions {
  host?: string;
  port: number;
  secure: boolean;
  user?: string;
  pass?: string;
  from: string;
  isProduction: boolean;
  logger: Logger;
}

export function createMailer(options: MailerOptions): Mailer {
  if (!options.host) {
    if (options.isProduction) {
      options.logger.warn(
        'SMTP_HOST is not set: email is disabled; verification and reset emails will not be sent',
      );
    }
    return {
      enabled: false,
      async send(mail) {
        if (options.isProduction) {
          // Never the body: it carries one-time links that must not end up in production logs.
          options.logger.warn({ subject: mail.subject }, 'email not sent: SMTP is not configured');
          return;
        }
        // Development convenience only: links would otherwise be unreachable without an SMTP server.
        options.logger.info(
          { to: mail.to, subject: mail.subject, text: mail.text },
          'email (SMTP not configured)',
        );
      },
      async verify() {},
      close() {},
    };
  }
  const transport = nodemailer.createTransport({
    // Pooled connections: the outbox sends in parallel batches, and a new connection (greeting, EHLO, login)
    // per message cost more than the message itself (docs/performance.md, "Email digests").
    pool: true,
    maxConnections: 5,
    maxMessages: 100,
    host: options.host,
    port: options.port,
    secure: options.secure,
    auth: options.user ? { user: options.user, pass: options.pass ?? '' } : undefined,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
    // Local test servers use self-signed certificates; STARTTLS is opportunistic unless SMTP_SECURE.
    tls: { rejectUnauthorized: options.isProduction },
  });
  return {
    enabled: true,
    async send(mail) {
      await transport.sendMail({ from: options.from, ...mail });
    },
    async verify() {
      await transport.verify();
    },
    close() {
      transport.close();
    },
  };
}

/**
 * Start-up SMTP check: a wrong password or an unreachable server otherwise only shows when the first email fails
 * (in the outbox, minutes later). Never throws and never blocks start-up: the service still starts (email is
 * queued and retried) and the outcome is logged — a warning naming the cause, or one info line.
 */
export async function checkSmtp(
  mailer: Mailer,
  logger: Logger,
  target: { host?: string; port: number },
  timeoutMs: number,
): Promise<boolean> {
  if (!mailer.enabled) return true;
  try {
    await withTimeout(mailer.verify(), timeoutMs, `no answer within ${timeoutMs} ms`);
    logger.info({ smtpHost: target.host, smtpPort: target.port }, 'SMTP connection verified');
    return true;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    logger.warn(
      { smtpHost: target.host, smtpPort: target.port, err: reason },
      `SMTP check failed (${reason}): emails are queued and retried, but none will be delivered until SMTP_HOST/SMTP_PORT/SMTP_USER/SMTP_PASSWORD are fixed`,
    );
    return false;
  }
}

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);
}

/** Subjects are header values: strip line breaks so user text cannot inject headers. */
export function safeSubject(value: string): string {
  return value.replace(/[\r\n]+/g, ' ').slice(0, 200);
}

/** A minimal, escaped transactional email with a single call to action. */
export function actionEmail(params: {
  to: string;
  subject: string;
  intro: string;
  actionLabel: string;
  url: string;
}): Mail {
  const subject = safeSubject(params.subject);
  return {
    to: params.to,
    subject,
    text: `${params.intro}\n\n${params.actionLabel}: ${params.url}\n`,
    html: `<!doctype html><html><body style="font-family:sans-serif"><p>${escapeHtml(params.intro)}</p><p><a href="${escapeHtml(params.url)}">${escapeHtml(params.actionLabel)}</a></p><p style="color:#666;font-size:12px">${escapeHtml(params.url)}</p></body></html>`,
  };
}
