// Registers the Web Push feature (CONTRACT §11; docs/architecture.md, "Web Push"). createPush builds what other
// features need early (`ctx.push`: the delivery strategy the notifications feature runs, and the worker);
// registerPush adds the routes and starts the worker.
import type { FastifyInstance } from 'fastify';
import type { SessionResolver } from '../auth/guard.js';
import type { Config } from '../config.js';
import type { Db } from '../infra/db.js';
import type { Housekeeping } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import type { ShutdownHooks } from '../infra/shutdown.js';
import type { DeliveryStrategy } from '../notifications/delivery.js';
import { createMessageBuilder } from './message.js';
import type { AddressCheck, PushEvents, PushSender } from './ports.js';
import { registerPushRoutes } from './routes.js';
import { createPushService, type PushService } from './service.js';
import { pushDeliveryStrategy } from './strategy.js';
import { createPushWorker, type PushWorker, pushDeliveryRetentionTask } from './worker.js';

export type { PushQueueStats } from './worker.js';

export interface Push {
  /** False when no VAPID keys are configured: the strategy delivers nothing and the routes answer 404. */
  enabled: boolean;
  strategy: DeliveryStrategy;
  worker: PushWorker | null;
  service: PushService;
}

export function createPush(deps: {
  config: Config;
  db: Db;
  logger: Logger;
  /** The webhook event queue (push.sent / push.failed). */
  events: PushEvents;
  /** The pinned-address sender, with PUSH_TIMEOUT_MS and the SSRF rules of PUSH_ALLOW_PRIVATE_ENDPOINTS. */
  createSender: () => PushSender;
  /** The SSRF address check of subscribed endpoints. */
  checkAddress: AddressCheck;
}): Push {
  const { config, db } = deps;
  const logger = deps.logger.child({ component: 'push' });
  const service = createPushService({
    db,
    allowPrivate: config.PUSH_ALLOW_PRIVATE_ENDPOINTS,
    checkAddress: deps.checkAddress,
    maxPerUser: config.PUSH_MAX_SUBSCRIPTIONS_PER_USER,
  });
  const vapid = config.vapid;
  if (!vapid) {
    return {
      enabled: false,
      // Push is off: never delivers, so the next strategy is tried.
      strategy: { name: 'push', deliver: async () => new Set<string>() },
      worker: null,
      service,
    };
  }
  const worker = createPushWorker({
    db,
    logger,
    send: deps.createSender(),
    builder: createMessageBuilder(vapid),
    webhooks: deps.events,
    feBaseUrl: config.FE_BASE_URL,
    ttlSeconds: config.PUSH_TTL_SECONDS,
    pollMs: config.PUSH_QUEUE_POLL_MS,
    retryBaseMs: config.PUSH_RETRY_BASE_MS,
    total: config.PUSH_CONCURRENCY,
    perService: Math.min(config.PUSH_CONCURRENCY_PER_SERVICE, config.PUSH_CONCURRENCY),
    // Longer than a request can take (its timeout, plus resolving the host) and recording it: a live worker's
    // row is never claimed twice.
    leaseMs: config.PUSH_TIMEOUT_MS * 3 + 1_000,
  });
  return {
    enabled: true,
    strategy: pushDeliveryStrategy({ db, kick: () => worker.kick() }),
    worker,
    service,
  };
}

export interface PushFeatureDeps {
  config: Config;
  sessions: SessionResolver;
  lifecycle: ShutdownHooks;
  /** Built early by createPush: the notifications feature runs its strategy. */
  push: Push;
  /** The shared housekeeping scheduler: the feature registers its tables' retention task. */
  housekeeping: Pick<Housekeeping, 'register'>;
}

export function registerPush(app: FastifyInstance, deps: PushFeatureDeps): void {
  const { config, lifecycle, push } = deps;
  registerPushRoutes(app, push.service, config.vapid?.publicKey ?? null, deps.sessions);
  deps.housekeeping.register(pushDeliveryRetentionTask());
  const { worker } = push;
  if (!worker) return;
  worker.start();
  // Stopped with the other workers, before the pools it writes through close; requests still in flight after
  // a short grace are sent again by another instance once their lease expires.
  lifecycle.onShutdown('close-connections', 'push', () => worker.stop());
}
