// Owns the account emails better-auth asks for (verification, password reset, magic link): rendered in the
// recipient's locale from the branded templates and queued on the durable email outbox, one row per token.
import { createHash, randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { type Db, rowsOf } from '../infra/db.js';
import type { EmailOutbox } from '../infra/email-outbox.js';
import type { Logger } from '../infra/logger.js';
import type { Mail } from '../infra/mailer.js';

/** Renders the account emails (email/renderer.ts: branded, localised templates); injected by the composition root. */
export interface AuthEmails {
  render(
    data: { template: 'verify-email' | 'reset-password' | 'magic-link'; url: string },
    locale: string | null | undefined,
  ): Omit<Mail, 'to'>;
}

export type AccountEmailKind = 'verify' | 'reset' | 'magic-link';

export function createAccountEmailSender(deps: {
  db: Db;
  outbox: Pick<EmailOutbox, 'enqueue'>;
  emails: AuthEmails;
  logger: Logger;
}) {
  const { db, outbox, emails, logger } = deps;
  const templates = { verify: 'verify-email', reset: 'reset-password', 'magic-link': 'magic-link' } as const;
  const localeOfAddress = async (email: string): Promise<string | null> => {
    const rows = rowsOf<{ locale: string | null }>(
      await db.execute(sql`select locale from "user" where email = ${email.toLowerCase()} limit 1`),
    );
    return rows[0]?.locale ?? null;
  };
  /** Renders the account email in the recipient's locale (looked up by address when the hook has no user). */
  const send = async (
    kind: AccountEmailKind,
    token: string,
    to: string,
    locale: string | null | undefined,
    url: string,
  ) => {
    let mail: Mail;
    try {
      const tag = locale === undefined ? await localeOfAddress(to) : locale;
      mail = { to, ...emails.render({ template: templates[kind], url }, tag) };
    } catch (err) {
      logger.error({ err, kind }, 'failed to render auth email');
      return;
    }
    // One queue row per request (a hash: the key is indexed and logged, the token must not be). Not one per token:
    // better-auth's verification token is a JWT with a seconds-resolution `iat`, so a "resend" within the same
    // second as the sign-up yields the very same token, and keying on it alone swallowed the resend the user
    // asked for. Queued, not sent: the request never waits for SMTP. The hooks do not
    // await this either: a reset or magic-link request for an unknown address queues nothing, and a response that
    // waited for the insert only for known addresses would tell them apart by timing.
    const dedupeKey = `auth:${kind}:${createHash('sha256').update(token).update(randomUUID()).digest('hex').slice(0, 40)}`;
    try {
      await outbox.enqueue([{ dedupeKey, ...mail }]);
    } catch (err) {
      // The database is down: the request is failing anyway; the user can ask for another link.
      logger.error({ err, to: mail.to, kind }, 'failed to queue auth email');
    }
  };
  return send;
}
