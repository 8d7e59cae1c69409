// Registers the notifications feature: repository, unread cache, SSE hub on the bus, delivery strategies (email
// through the shared outbox that app.ts owns), retention job, routes, and `app.notifications` (the service other features call).
import type { FastifyInstance } from 'fastify';
import { createDelivery, emailStrategy, sseStrategy } from './delivery.js';
import { NotificationErrorCode } from './errors.js';
import { NOTIFICATION_EVENTS_TOPIC, NotificationBusMessageSchema } from './events.js';
import { createNotificationRepository } from './repository.js';
import { startRetentionJob } from './retention.js';
import { registerNotificationRoutes } from './routes.js';
import { actionUrlPolicy } from './schemas.js';
import { createNotificationService, type NotificationService } from './service.js';
import { createStreamHub, type StreamHub } from './stream-hub.js';
import { createUnreadCache } from './unread-cache.js';

export { runRetention } from './retention.js';
export type { NotificationService } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Create notifications from other features: `app.notifications.createForUser(userId, {...})`. */
    notifications: NotificationService;
    notificationStreams: StreamHub;
  }
}

export function registerNotifications(app: FastifyInstance): void {
  const { config, database, store, email, realtime, lifecycle, revocation, events } = app.ctx;
  const logger = app.log.child({ feature: 'notifications' });
  const repo = createNotificationRepository(database.db, events);
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
      emailStrategy({ repo, emails: email.notificationEmails }),
      // Web Push (push/strategy.ts): queues one message per subscribed browser; built in app.ts like webhooks.
      app.ctx.push.strategy,
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
    maxBusPayloadBytes: config.BUS_MAX_PAYLOAD_BYTES,
  });
  const hub = createStreamHub({
    repo,
    presence: realtime.presence,
    logger,
    // A revocation whose bus message was lost still ends the stream at the next convergence check.
    isSessionLive: (userId, sessionId) => revocation.isSessionLive(userId, sessionId),
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
    else app.ctx.metrics.time(app.ctx.metrics.sseFanout, () => hub.onBusMessage(message));
  });
  // Messages may have been lost while the bus was degraded: repair streams and re-check sessions now.
  const offRecovered = realtime.onRecovered(() => void hub.converge());
  const offDisconnect = realtime.onUserDisconnect((event) => {
    // Notification streams carry nothing that depends on role or profile; only ended sessions close them.
    if (event.reason === 'account_changed') return;
    hub.disconnectUser(event.userId, event.reason, event.sessionId);
  });

  const retention = startRetentionJob(
    { config, database, store, logger },
    config.RETENTION_INTERVAL_MS,
    unread,
  );

  app.decorate('notifications', service);
  app.decorate('notificationStreams', hub);
  registerNotificationRoutes(app, service, hub);

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
    await retention.stop();
    unread.close();
  });
}
