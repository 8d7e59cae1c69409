// Registers the notifications feature: repository, unread cache, SSE hub on the bus, delivery strategies (email
// through the shared outbox that app.ts owns), retention job, routes. Returns the service other features call.
import type { FastifyInstance } from 'fastify';
import type { SessionResolver } from '../auth/guard.js';
import type { Revocation } from '../auth/revocation.js';
import type { Config } from '../config.js';
import type { EventOutbox } from '../events/outbox.js';
import type { Database } from '../infra/db.js';
import type { Housekeeping } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import type { ObserveSeconds, ShutdownHooks } from '../infra/shutdown.js';
import type { Store } from '../infra/store.js';
import type { Realtime } from '../realtime/index.js';
import {
  createDelivery,
  type DeliveryStrategy,
  emailStrategy,
  type NotificationEmails,
  sseStrategy,
} from './delivery.js';
import { NotificationErrorCode } from './errors.js';
import { NOTIFICATION_EVENTS_TOPIC, NotificationBusMessageSchema } from './events.js';
import { createNotificationRepository } from './repository.js';
import { notificationRetentionTask } from './retention.js';
import { registerNotificationRoutes } from './routes.js';
import { actionUrlPolicy } from './schemas.js';
import { createNotificationService, type NotificationService } from './service.js';
import { createStreamHub, type StreamHub } from './stream-hub.js';
import { createUnreadCache } from './unread-cache.js';

export { notificationRetentionTask } from './retention.js';
export type { NotificationService } from './service.js';

export interface NotificationsDeps {
  config: Config;
  logger: Logger;
  database: Database;
  store: Store;
  realtime: Realtime;
  sessions: SessionResolver;
  revocation: Revocation;
  events: EventOutbox;
  lifecycle: ShutdownHooks;
  /** The email of an offline user (email/): the `email` strategy's renderer and queue. */
  notificationEmails: NotificationEmails;
  /** Strategies after `sse` and `email` in the §4 order (Web Push). */
  extraStrategies: DeliveryStrategy[];
  /** Time to fan one bus message out to this instance's streams. */
  observeFanout: ObserveSeconds;
  /** The shared housekeeping scheduler: the feature registers its tables' retention task. */
  housekeeping: Pick<Housekeeping, 'register'>;
}

/** What other parts use: the service (create, read, forget caches) and the stream hub (metrics, tests). */
export interface NotificationsFeature {
  service: NotificationService;
  streams: StreamHub;
}

export function registerNotifications(app: FastifyInstance, deps: NotificationsDeps): NotificationsFeature {
  const { config, database, store, realtime, lifecycle, revocation, events } = deps;
  const logger = deps.logger.child({ feature: 'notifications' });
  // List statements in flight per executor before pages queue and share one (page-batch.ts): a few, and always
  // a connection left for the writes on a small pool.
  const repo = createNotificationRepository(database.db, events, {
    listStatementsInFlight: Math.max(1, Math.min(4, config.DATABASE_POOL_SIZE - 1)),
  });
  const reads = database.reads;
  const unread = createUnreadCache({
    store,
    logger,
    countFromDb: (id) => repo.unreadCount(id),
    // With replicas, every change records the primary's WAL position for read-your-writes.
    ...(reads?.enabled ? { writePosition: () => reads.writePosition() } : {}),
  });
  const delivery = createDelivery(
    [
      sseStrategy(realtime.presence),
      emailStrategy({ repo, emails: deps.notificationEmails }),
      // Web Push (push/strategy.ts): queues one message per subscribed browser; built in app.ts like webhooks.
      ...deps.extraStrategies,
    ],
    logger,
  );
  const service = createNotificationService({
    repo,
    unread,
    ...(reads ? { reads } : {}),
    realtime,
    delivery,
    policy: actionUrlPolicy(config.FE_BASE_URL, config.ACTION_ALLOWED_DOMAINS),
    logger,
    batchSize: config.BROADCAST_BATCH_SIZE,
    writeConcurrency: config.BROADCAST_WRITE_CONCURRENCY,
    maxBusPayloadBytes: config.BUS_MAX_PAYLOAD_BYTES,
  });
  const hub = createStreamHub({
    repo,
    presence: realtime.presence,
    logger,
    // A revocation whose bus message was lost still ends the stream at the next convergence check.
    isSessionLive: (userId, sessionId) => revocation.isSessionLive(userId, sessionId),
    sessionsLive: (sessions) => revocation.sessionsLive(sessions),
    keepAliveMs: config.SSE_KEEPALIVE_MS,
    maxBufferedBytes: config.SSE_MAX_BUFFERED_BYTES,
    limits: {
      perUser: config.SSE_MAX_STREAMS_PER_USER,
      perIp: config.SSE_MAX_STREAMS_PER_IP,
      opensPerWindow: config.SSE_OPEN_RATE_LIMIT,
      openWindowMs: config.SSE_OPEN_RATE_WINDOW_MS,
    },
  });

  const unsubscribe = realtime.bus.subscribe<unknown>(NOTIFICATION_EVENTS_TOPIC, (payload) => {
    const parsed = NotificationBusMessageSchema.safeParse(payload);
    if (!parsed.success) {
      logger.warn({ issues: parsed.error.issues.slice(0, 3) }, 'malformed notification bus message dropped');
      return;
    }
    const message = parsed.data;
    // Sync messages only start repairs (reads); the fan-out figure is about writing events to streams.
    if (message.kind === 'sync') hub.onBusMessage(message);
    else {
      const started = performance.now();
      hub.onBusMessage(message);
      deps.observeFanout((performance.now() - started) / 1000);
    }
  });
  // Messages may have been lost while the bus was degraded: repair streams and re-check sessions now.
  const offRecovered = realtime.onRecovered(() => void hub.converge());
  const offDisconnect = realtime.onUserDisconnect((event) => {
    // Notification streams carry nothing that depends on role or profile; only ended sessions close them.
    if (event.reason === 'account_changed') return;
    hub.disconnectUser(event.userId, event.reason, event.sessionId);
  });

  deps.housekeeping.register(notificationRetentionTask(config, unread));

  registerNotificationRoutes(app, { service, hub, sessions: deps.sessions, lifecycle, realtime });

  const endStreams = () =>
    hub.closeAll(NotificationErrorCode.SHUTTING_DOWN, 'The server is restarting; reconnect shortly');
  // Fastify force-closes open connections before onClose (where the lifecycle runs), so streams are told
  // why in preClose too; closeAll is idempotent.
  app.addHook('preClose', async () => endStreams());
  lifecycle.onShutdown('notify-clients', 'notification-streams', endStreams);
  lifecycle.onShutdown('close-connections', 'notification-workers', async () => {
    unsubscribe();
    offRecovered();
    offDisconnect();
    unread.close();
  });
  return { service, streams: hub };
}
