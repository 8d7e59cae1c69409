// The delivery channels the features write to, built before them: the domain-event port with its consumers
// attached (webhooks; push reads it too), Web Push (the notifications feature runs its strategy), and the email
// outbox every feature sends through (its outcomes become `email.sent` / `email.failed` events).
import type { Config } from '../config.js';
import { emailOutcomeEvent } from '../events/email.js';
import { createEventOutbox } from '../events/outbox.js';
import type { Database } from '../infra/db.js';
import { createEmailOutbox } from '../infra/email-outbox.js';
import type { Logger } from '../infra/logger.js';
import type { Mailer } from '../infra/mailer.js';
import { createPush } from '../push/index.js';
import { createWebhooks } from '../webhooks/index.js';
import type { Resolver } from '../webhooks/ssrf.js';
import { pushTransport } from './outbound.js';

export function createChannels(
  config: Config,
  infra: { database: Database; mailer: Mailer; logger: Logger },
  resolvers: { webhookResolver?: Resolver; pushResolver?: Resolver },
) {
  const { database, mailer, logger } = infra;
  const events = createEventOutbox();
  const webhooks = createWebhooks({
    config,
    db: database.db,
    logger,
    ...(resolvers.webhookResolver ? { resolve: resolvers.webhookResolver } : {}),
  });
  events.attach(webhooks.events);
  const push = createPush({
    config,
    db: database.db,
    logger,
    events,
    ...pushTransport(config, resolvers.pushResolver),
  });
  const outbox = createEmailOutbox({
    db: database.db,
    mailer,
    logger: logger.child({ component: 'email-outbox' }),
    pollMs: config.EMAIL_QUEUE_POLL_MS,
    maxAttempts: config.EMAIL_MAX_ATTEMPTS,
    retryBaseMs: config.EMAIL_RETRY_BASE_MS,
    onOutcome: (tx, outcome) => events.write(tx, [emailOutcomeEvent(outcome)]).then(() => undefined),
  });
  return { events, webhooks, push, outbox };
}
