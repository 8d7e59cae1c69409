// The email feature (docs/email.md): branded, localised templates (renderer.ts), one-click unsubscribe tokens and
// route (tokens.ts, routes.ts), per-recipient notification emails (notification-emails.ts) and digests (digest.ts).
// Sending itself is the shared outbox's (infra/email-outbox.ts).
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import type { EventOutbox } from '../events/outbox.js';
import type { Database, Db } from '../infra/db.js';
import type { EmailOutbox } from '../infra/email-outbox.js';
import type { Housekeeping } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import type { ShutdownHooks } from '../infra/shutdown.js';
import { createNotificationRepository } from '../notifications/repository.js';
import { createDigests, digestRetentionTask } from './digest.js';
import { createNotificationEmails } from './notification-emails.js';
import { createEmailRenderer, type EmailRenderer } from './renderer.js';
import { registerUnsubscribeRoutes } from './routes.js';
import { createUnsubscribeTokens } from './tokens.js';

export type { EmailRenderer } from './renderer.js';

/**
 * Templates and their overrides are loaded and checked here, so a broken override stops start-up before anything
 * else (database, store) is opened.
 */
export function createEmailRendererFromConfig(config: Config): EmailRenderer {
  return createEmailRenderer({
    appName: config.APP_NAME,
    logoUrl: config.EMAIL_LOGO_URL,
    accentColor: config.EMAIL_ACCENT_COLOR,
    defaultLocale: config.DEFAULT_LOCALE,
    feBaseUrl: config.FE_BASE_URL,
    templatesDir: config.EMAIL_TEMPLATES_DIR,
  });
}

export function createEmail(deps: {
  config: Config;
  db: Db;
  outbox: EmailOutbox;
  logger: Logger;
  renderer: EmailRenderer;
}) {
  const { config, renderer } = deps;
  const tokens = createUnsubscribeTokens(config.AUTH_SECRET);
  const digests = createDigests({
    db: deps.db,
    renderer,
    tokens,
    outbox: deps.outbox,
    logger: deps.logger.child({ component: 'email-digests' }),
    windows: { hourly: config.EMAIL_DIGEST_HOURLY_MS, daily: config.EMAIL_DIGEST_DAILY_MS },
    apiBaseUrl: config.API_BASE_URL,
    pollMs: config.EMAIL_QUEUE_POLL_MS,
  });
  const notificationEmails = createNotificationEmails({
    renderer,
    tokens,
    outbox: deps.outbox,
    digests,
    apiBaseUrl: config.API_BASE_URL,
  });
  return { renderer, tokens, digests, notificationEmails };
}

export type Email = ReturnType<typeof createEmail>;

export interface EmailDeps {
  config: Config;
  database: Database;
  /** The domain-event port: an unsubscribe changes preferences, whose events go out through it. */
  events: EventOutbox;
  lifecycle: ShutdownHooks;
  email: Email;
  /** The shared housekeeping scheduler: the feature registers its tables' retention task. */
  housekeeping: Pick<Housekeeping, 'register'>;
}

export function registerEmail(app: FastifyInstance, deps: EmailDeps): void {
  const { config, database, email, events, lifecycle } = deps;
  registerUnsubscribeRoutes(app, {
    tokens: email.tokens,
    repo: createNotificationRepository(database.db, events),
    feBaseUrl: config.FE_BASE_URL,
  });
  email.digests.start();
  deps.housekeeping.register(digestRetentionTask());
  lifecycle.onShutdown('close-connections', 'email-digests', () => email.digests.stop());
}
