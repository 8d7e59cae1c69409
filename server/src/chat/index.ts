// Registers the chat feature: the /chat WebSocket endpoint, its HTTP routes, the bus subscription that carries
// chat events between instances, presence broadcasts, user disconnections and the shutdown steps.
import type { FastifyInstance } from 'fastify';
import { createChatGateway } from './chat-gateway.js';
import { createChatHub } from './chat-hub.js';
import { createChatRepository } from './chat-repository.js';
import { registerChatRoutes } from './chat-routes.js';
import { createChatService, createHistoryCache } from './chat-service.js';
import { CHAT_BUS_TOPIC, ChatBusEventSchema, CloseCode, encode } from './protocol.js';
import { createMessageThrottle, createTypingThrottle } from './throttle.js';

// The history sent on connect is cached per instance; bus events invalidate it, this bounds staleness otherwise.
const HISTORY_CACHE_TTL_MS = 2_000;

export function registerChat(app: FastifyInstance): void {
  const { config, logger, database, store, realtime, lifecycle } = app.ctx;
  const log = logger.child({ feature: 'chat' });
  const repo = createChatRepository(database.db);
  const hub = createChatHub({
    pingIntervalMs: config.WS_PING_INTERVAL_MS,
    sendBufferLimitBytes: config.CHAT_SEND_BUFFER_LIMIT_BYTES,
    logger: log,
  });
  const throttle = createMessageThrottle({
    store,
    isDegraded: () => realtime.bus.isDegraded(),
    limit: config.CHAT_THROTTLE_LIMIT,
    windowMs: config.CHAT_THROTTLE_WINDOW_MS,
    logger: log,
  });
  const typing = createTypingThrottle();
  const history = createHistoryCache(repo, HISTORY_CACHE_TTL_MS);
  const service = createChatService({
    hub,
    repo,
    bus: realtime.bus,
    throttle,
    typing,
    logger: log,
    frameLimit: config.CHAT_FRAME_LIMIT,
  });
  let stopping = false;
  createChatGateway(app, { hub, service, history, typing, isStopping: () => stopping });

  const unsubscribe = [
    realtime.bus.subscribe(CHAT_BUS_TOPIC, (payload) => {
      // Every bus message is validated: another instance (or a bad actor on the store) could send anything.
      const parsed = ChatBusEventSchema.safeParse(payload);
      if (!parsed.success) {
        log.warn({ issues: parsed.error.issues.slice(0, 3) }, 'chat: malformed bus event dropped');
        return;
      }
      const event = parsed.data;
      if (event.type === 'typing') {
        const { exceptConnectionId, ...out } = event;
        hub.broadcast(encode(out), exceptConnectionId);
        return;
      }
      history.invalidate();
      hub.broadcast(encode(event));
    }),
    realtime.presence.onChatCounts((counts) => {
      hub.broadcast(
        encode({ type: 'presence', guests: counts.guests, members: counts.members, admins: counts.admins }),
      );
    }),
    realtime.onUserDisconnect((event) => {
      const code = event.reason === 'banned' ? CloseCode.POLICY : CloseCode.SESSION_ENDED;
      const accountChanged = event.reason === 'account_changed';
      const text =
        event.reason === 'banned' ? 'banned' : accountChanged ? 'account changed' : 'session ended';
      for (const conn of hub.ofUser(event.userId)) {
        // A sign-out of one device closes only that session's sockets.
        if (event.sessionId && conn.identity?.sessionId !== event.sessionId) continue;
        hub.close(conn, code, text);
      }
      typing.forget(event.userId);
      // Peers learn about user-wide disconnections only; after a one-device sign-out the user may still be here,
      // and after an account change the user reconnects at once with the new identity.
      if (!event.sessionId && !accountChanged) {
        hub.broadcast(encode({ type: 'user_disconnected', userId: event.userId }));
      }
    }),
  ];

  registerChatRoutes(app, {
    repo,
    onPurged: (userId, deletedCount) => service.publish({ type: 'messages_purged', userId, deletedCount }),
  });

  let shutdown: Promise<void> | undefined;
  const stop = () => {
    shutdown ??= (async () => {
      stopping = true;
      hub.stop();
      // The upgrade listener stays: until the HTTP server closes it answers new upgrades with 503.
      await hub.closeAll(
        CloseCode.GOING_AWAY,
        'server shutting down',
        Math.min(2_000, config.SHUTDOWN_TIMEOUT_MS / 4),
      );
      for (const off of unsubscribe) off();
      throttle.close();
    })();
    return shutdown;
  };
  // The lifecycle runs notify-clients from Fastify's preClose hook, before the HTTP server (whose close would
  // wait for upgraded sockets) is stopped; stop() is idempotent.
  lifecycle.onShutdown('notify-clients', 'chat-sockets', stop);
}
