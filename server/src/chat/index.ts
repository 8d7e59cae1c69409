// Registers the chat feature: wires the gateway, hub and service together, session re-validation, presence
// broadcasts and the shutdown step; what each piece does lives in that piece.
import type { FastifyInstance } from 'fastify';
import { createChatGateway } from './gateway.js';
import { type ChatConnection, type ChatIdentity, createChatHub } from './hub.js';
import { CloseCode, encode } from './protocol.js';
import { createChatRepository } from './repository.js';
import { registerChatRoutes } from './routes.js';
import { createChatService, createHistoryCache } from './service.js';
import { createMessageThrottle, createTypingThrottle } from './throttle.js';

// The history sent on connect is cached per instance; bus events invalidate it, this bounds staleness otherwise.
const HISTORY_CACHE_TTL_MS = 2_000;

export function registerChat(app: FastifyInstance): void {
  const { config, logger, database, store, realtime, lifecycle, revocation, events } = app.ctx;
  const log = logger.child({ feature: 'chat' });
  const repo = createChatRepository(database.db, events);
  const hub = createChatHub({
    presence: realtime.presence,
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
    history,
    onSendStage: (stage, seconds) => app.ctx.metrics.chatSendStage.observe({ stage }, seconds),
  });
  createChatGateway(app, { hub, service, history, typing });

  const unsubscribe = [
    realtime.onRecovered(() => {
      // After the auth layer's repair drain was started (it subscribed first); sessionStatus reads PostgreSQL
      // while the store is not yet trusted, so this does not depend on the drain having finished.
      void revalidateAll();
    }),
    service.listen(),
    realtime.presence.onChatCounts((counts) => {
      hub.broadcast(
        encode({ type: 'presence', guests: counts.guests, members: counts.members, admins: counts.admins }),
      );
    }),
    realtime.onUserDisconnect((event) => service.disconnectUser(event)),
  ];

  registerChatRoutes(app, {
    repo,
    onPurged: (userId, deletedCount) => service.publish({ type: 'messages_purged', userId, deletedCount }),
  });

  let shutdown: Promise<void> | undefined;
  const stop = () => {
    shutdown ??= (async () => {
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
