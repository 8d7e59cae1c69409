// Registers the chat feature: the /chat WebSocket endpoint, its HTTP routes, the bus subscription that carries
// chat events between instances, presence broadcasts, user disconnections and the shutdown steps.
import type { FastifyInstance } from 'fastify';
import { createChatGateway } from './gateway.js';
import { type ChatConnection, type ChatIdentity, createChatHub } from './hub.js';
import { CHAT_BUS_TOPIC, ChatBusEventSchema, CloseCode, encode } from './protocol.js';
import { createChatRepository } from './repository.js';
import { registerChatRoutes } from './routes.js';
import { createChatService, createHistoryCache } from './service.js';
import { createMessageThrottle, createTypingThrottle } from './throttle.js';

// The history sent on connect is cached per instance; bus events invalidate it, this bounds staleness otherwise.
const HISTORY_CACHE_TTL_MS = 2_000;

export function registerChat(app: FastifyInstance): void {
  const { config, logger, database, store, realtime, lifecycle, revocation } = app.ctx;
  const log = logger.child({ feature: 'chat' });
  const repo = createChatRepository(database.db);
  const hub = createChatHub({
    pingIntervalMs: config.WS_PING_INTERVAL_MS,
    sendBufferLimitBytes: config.CHAT_SEND_BUFFER_LIMIT_BYTES,
    logger: log,
    onBroadcastSeconds: (seconds) => app.ctx.metrics.chatFanout.observe(seconds),
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
  /** Closes the socket when its session has ended; true while it is live (or cannot be checked: an outage). */
  const sessionLive = async (conn: ChatConnection, id: ChatIdentity): Promise<boolean> => {
    const status = await revocation.sessionStatus(id.userId, id.sessionId);
    if (status === 'live' || status === 'unknown') return true;
    if (status === 'banned') hub.close(conn, CloseCode.POLICY, 'banned');
    else hub.close(conn, CloseCode.SESSION_ENDED, status === 'expired' ? 'session expired' : 'session ended');
    return false;
  };
  /**
   * Re-validates every local member socket (one check per session). Runs when the bus recovers (a revocation
   * published while it was degraded never reached this instance) and on every ping round (any single lost
   * bus message), so open sockets converge on the truth without relying on the disconnect message.
   */
  let revalidating = false;
  const revalidateAll = async () => {
    if (revalidating) return;
    revalidating = true;
    try {
      const bySession = new Map<string, ChatConnection[]>();
      for (const conn of hub.all()) {
        if (!conn.identity) continue;
        const list = bySession.get(conn.identity.sessionId);
        if (list) list.push(conn);
        else bySession.set(conn.identity.sessionId, [conn]);
      }
      for (const conns of bySession.values()) {
        const first = conns[0];
        if (!first?.identity) continue;
        const status = await revocation.sessionStatus(first.identity.userId, first.identity.sessionId);
        if (status === 'live' || status === 'unknown') continue;
        for (const conn of conns) {
          if (status === 'banned') hub.close(conn, CloseCode.POLICY, 'banned');
          else hub.close(conn, CloseCode.SESSION_ENDED, 'session ended');
        }
        typing.forget(first.identity.userId);
      }
    } catch (err) {
      log.warn({ err }, 'chat: socket re-validation failed');
    } finally {
      revalidating = false;
    }
  };
  const revalidateTimer = setInterval(() => {
    void revalidateAll();
  }, config.WS_PING_INTERVAL_MS);
  revalidateTimer.unref();
  const service = createChatService({
    hub,
    repo,
    bus: realtime.bus,
    throttle,
    typing,
    logger: log,
    sessionLive,
    frameLimit: config.CHAT_FRAME_LIMIT,
  });
  let stopping = false;
  createChatGateway(app, { hub, service, history, typing, isStopping: () => stopping });

  const unsubscribe = [
    realtime.onRecovered(() => {
      // After the auth layer's repair drain was started (it subscribed first); sessionStatus reads PostgreSQL
      // while the store is not yet trusted, so this does not depend on the drain having finished.
      void revalidateAll();
    }),
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
      clearInterval(revalidateTimer);
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
