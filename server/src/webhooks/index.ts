// Registers the webhooks feature. createWebhooks builds the pieces other modules need early (`ctx.webhooks`:
// the event queue features write to, and the worker); registerWebhooks adds the admin routes, listens for
// endpoint changes made on other instances, and starts the worker (docs/architecture.md, "Webhooks").
import type { FastifyInstance } from 'fastify';
import type { SessionResolver } from '../auth/guard.js';
import type { Config } from '../config.js';
import type { Database, Db } from '../infra/db.js';
import type { Housekeeping } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import type { ShutdownHooks } from '../infra/shutdown.js';
import type { Realtime } from '../realtime/index.js';
import { createWebhookEvents, WEBHOOKS_CHANGED_TOPIC, type WebhookEvents } from './events.js';
import { registerWebhookRoutes } from './routes.js';
import { createSecretBox } from './secret.js';
import { createSender } from './sender.js';
import { createWebhookService } from './service.js';
import { type Resolver, systemResolver } from './ssrf.js';
import { createWebhookWorker, PREFETCH, type WebhookWorker, webhookDeliveryRetentionTask } from './worker.js';

export type { WebhookEvents, WebhookEventType } from './events.js';
export { WEBHOOK_EVENT_TYPES } from './events.js';
export type { WebhookQueueStats } from './worker.js';

/** How often each instance re-reads the subscribed event types even without a change message. */
const SUBSCRIPTION_REFRESH_MS = 10_000;

export interface Webhooks {
  events: WebhookEvents;
  worker: WebhookWorker;
  resolve: Resolver;
  secrets: ReturnType<typeof createSecretBox>;
}

export function createWebhooks(deps: {
  config: Config;
  db: Db;
  logger: Logger;
  /** Host resolution for the SSRF check (tests inject one; default: the system resolver). */
  resolve?: Resolver;
}): Webhooks {
  const { config, db } = deps;
  const logger = deps.logger.child({ component: 'webhooks' });
  const resolve = deps.resolve ?? systemResolver;
  const secrets = createSecretBox(config.AUTH_SECRET);
  const events = createWebhookEvents({ db, logger, refreshMs: SUBSCRIPTION_REFRESH_MS });
  const worker = createWebhookWorker({
    db,
    logger,
    secrets,
    send: createSender({
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_URLS,
      resolve,
    }),
    pollMs: config.WEBHOOK_QUEUE_POLL_MS,
    retryBaseMs: config.WEBHOOK_RETRY_BASE_MS,
    retryWindowMs: config.WEBHOOK_RETRY_WINDOW_MS,
    perEndpoint: config.WEBHOOK_CONCURRENCY_PER_ENDPOINT,
    total: config.WEBHOOK_CONCURRENCY,
    // Longer than a buffered row can wait behind its endpoint's slots (PREFETCH sends at most, each bounded by
    // the timeout) plus its own send and recording it: a live worker's row is never claimed twice.
    leaseMs: config.WEBHOOK_TIMEOUT_MS * (PREFETCH + 1) + 5_000,
  });
  events.onQueued(() => worker.kick());
  return { events, worker, resolve, secrets };
}

export interface WebhooksFeatureDeps {
  config: Config;
  database: Database;
  realtime: Realtime;
  sessions: SessionResolver;
  lifecycle: ShutdownHooks;
  /** Built early by createWebhooks: its event sink is attached to the outbox before the writers run. */
  webhooks: Webhooks;
  /** The shared housekeeping scheduler: the feature registers its tables' retention task. */
  housekeeping: Pick<Housekeeping, 'register'>;
}

export async function registerWebhooks(app: FastifyInstance, deps: WebhooksFeatureDeps): Promise<void> {
  const { config, database, realtime, lifecycle, webhooks } = deps;
  const service = createWebhookService({
    db: database.db,
    secrets: webhooks.secrets,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_URLS,
    resolve: webhooks.resolve,
    changed: async () => {
      await webhooks.events.refresh();
      await realtime.bus.publish(WEBHOOKS_CHANGED_TOPIC, {});
    },
    queued: () => webhooks.worker.kick(),
  });
  // Delivered here at once and on every other instance through the bus: each re-reads which events are wanted
  // and hands back the deliveries it had claimed with the endpoint's old settings (worker.reclaim).
  const unsubscribe = realtime.bus.subscribe<unknown>(WEBHOOKS_CHANGED_TOPIC, () => {
    void webhooks.events.refresh();
    void webhooks.worker.reclaim();
  });
  registerWebhookRoutes(app, service, deps.sessions);
  deps.housekeeping.register(webhookDeliveryRetentionTask());
  await webhooks.events.refresh();
  webhooks.worker.start();
  // Stopped with the other workers, before the pools it writes through close; sends still in flight after a
  // short grace are sent again by another instance once their lease expires.
  lifecycle.onShutdown('close-connections', 'webhooks', async () => {
    unsubscribe();
    webhooks.events.close();
    await webhooks.worker.stop();
  });
}
