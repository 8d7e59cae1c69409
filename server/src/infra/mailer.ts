// Owns outgoing email: nodemailer over SMTP_*; without SMTP the message is logged in development only.
import nodemailer from 'nodemailer';
import type { Logger } from './logger.js';

export interface Mail {
  to: string;
  subject: string;
  text: string;
  html: string;
}

export interface Mailer {
  /** False when no SMTP server is configured (development logs the mail; production drops it with a warning). */
  enabled: boolean;
  send(mail: Mail): Promise<void>;
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
      close() {},
    };
  }
  const transport = nodemailer.createTransport({
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
    close() {
      transport.close();
    },
  };
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
