// Registers the chat feature: wires the gateway, hub and service together, session re-validation, presence
// broadcasts and the shutdown step; what each piece does lives in that piece.
import type { FastifyInstance } from 'fastify';
import type { SessionResolver } from '../auth/guard.js';
import type { Revocation } from '../auth/revocation.js';
import type { Config } from '../config.js';
import type { EventOutbox } from '../events/outbox.js';
import type { Database } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import { createReadPositions } from '../infra/read-positions.js';
import type { ObserveSeconds, ShutdownHooks } from '../infra/shutdown.js';
import type { Store } from '../infra/store.js';
import type { Realtime } from '../realtime/index.js';
import { createChatGateway } from './gateway.js';
import { type ChatConnection, type ChatIdentity, createChatHub } from './hub.js';
import { createRoomLive } from './live.js';
import { type ChatNotificationSink, createChatNotifier } from './notify.js';
import { CloseCode, encode, GENERAL_ROOM_ID } from './protocol.js';
import { createChatReads } from './reads.js';
import { createChatRepository } from './repository.js';
import { createRoomPresence } from './room-presence.js';
import { createRoomsRepository } from './rooms.js';
import { registerRoomRoutes } from './rooms-routes.js';
import { registerChatRoutes } from './routes.js';
import { type ChatService, createChatService, createHistoryCache } from './service.js';
import { createMessageThrottle, createTypingThrottle } from './throttle.js';

// The history sent on connect is cached per instance; bus events invalidate it, this bounds staleness otherwise.
const HISTORY_CACHE_TTL_MS = 2_000;

export interface ChatDeps {
  config: Config;
  logger: Logger;
  database: Database;
  store: Store;
  realtime: Realtime;
  sessions: SessionResolver;
  revocation: Revocation;
  events: EventOutbox;
  lifecycle: ShutdownHooks;
  /** Notifications from chat (DMs, mentions) go through the notifications feature's service. */
  notifications: ChatNotificationSink;
  /** Time of each flush of fan-out writes to this instance's sockets. */
  observeFanout: ObserveSeconds;
  /** Fan-out frames handed to sockets and the socket writes they took (counters). */
  countFanoutWrites(frames: number, writes: number): void;
  /** Time of each stage of a send (store, insert, publish). */
  observeSendStage(stage: string, seconds: number): void;
}

export function registerChat(app: FastifyInstance, deps: ChatDeps): void {
  const { config, logger, database, store, realtime, lifecycle, revocation, events, sessions } = deps;
  const log = logger.child({ feature: 'chat' });
  const repo = createChatRepository(database.db, events);
  const hub = createChatHub({
    presence: realtime.presence,
    pingIntervalMs: config.WS_PING_INTERVAL_MS,
    sendBufferLimitBytes: config.CHAT_SEND_BUFFER_LIMIT_BYTES,
    logger: log,
    onFlushSeconds: deps.observeFanout,
    coalesceMs: config.CHAT_COALESCE_MS,
    onWrites: deps.countFanoutWrites,
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
  // HTTP history and room lists may come from a replica (DATABASE_READ_URL); the socket's own reads (history on
  // connect, resume) stay on the primary, which the live path's revisions are checked against.
  const positions = createReadPositions({
    store,
    reads: database.reads,
    namespace: 'chat',
    maxLagMs: config.DATABASE_READ_MAX_LAG_MS,
    logger: log,
    storeDown: () => realtime.bus.isDegraded(),
  });
  const reads = createChatReads({ primary: database.db, router: database.reads, positions });
  const rooms = createRoomsRepository(database.db, {
    roomsPerUser: config.CHAT_MAX_ROOMS_PER_USER,
    membersPerPrivateRoom: config.CHAT_MAX_PRIVATE_ROOM_MEMBERS,
  });
  // The service receives every chat bus event (general's topic and each room's); it exists only below.
  let service: ChatService | undefined;
  const live = createRoomLive({
    hub,
    bus: realtime.bus,
    repo,
    membersAmong: (roomId, userIds) => rooms.membersAmong(roomId, userIds),
    generalSnapshot: () => history.get(),
    onGeneralChange: () => history.invalidate(),
    onBusEvent: (payload) => service?.receive(payload),
    presence: {
      userJoined: (roomId, userId) => roomPresence.userJoined(roomId, userId),
      userLeft: (roomId, userId) => roomPresence.userLeft(roomId, userId),
      snapshot: (roomId) => roomPresence.snapshot(roomId),
    },
    logger: log,
  });
  const roomPresence = createRoomPresence({
    store,
    instanceId: config.INSTANCE_ID,
    debounceMs: config.PRESENCE_DEBOUNCE_MS,
    liveInstances: async () => (await realtime.instances()).map((i) => i.instanceId),
    localUsers: (roomId) => live.localUsers(roomId),
    announce: (roomId) => service?.publish({ type: 'presence_changed', roomId }),
    deliver: (roomId, frame) => live.toRoom(roomId, frame),
    logger: log,
  });
  const notifier = createChatNotifier({
    sink: deps.notifications,
    store,
    foldMs: config.CHAT_NOTIFY_FOLD_MS,
    memberIds: (roomId, limit) => rooms.memberIds(roomId, limit),
    membersByUsername: (roomId, names) => rooms.membersByUsername(roomId, names),
    roomName: async (roomId) => (await rooms.view(roomId, { userId: '', isAdmin: true }))?.name ?? 'a room',
    onlineUsers: (roomId) => roomPresence.onlineUsers(roomId),
    logger: log,
  });
  const createLimit = createMessageThrottle({
    store,
    isDegraded: () => realtime.bus.isDegraded(),
    limit: config.CHAT_ROOM_CREATES_PER_HOUR,
    windowMs: 60 * 60 * 1000,
    logger: log,
    keyPrefix: 'chat:rooms:created:',
  });
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
  service = createChatService({
    hub,
    repo,
    bus: realtime.bus,
    throttle,
    typing,
    logger: log,
    sessionLive,
    frameLimit: config.CHAT_FRAME_LIMIT,
    history,
    onSendStage: deps.observeSendStage,
    live,
    rooms,
    notifier,
    onRoomPresence: (roomId) => roomPresence.changed(roomId),
    ...(reads.enabled ? { changed: (scope) => reads.changed(scope) } : {}),
  });
  const chat = service;
  createChatGateway(app, { hub, service: chat, live, typing, config, sessions, realtime, lifecycle, logger });

  const unsubscribe = [
    realtime.onRecovered(() => {
      // After the auth layer's repair drain was started (it subscribed first); sessionStatus reads PostgreSQL
      // while the store is not yet trusted, so this does not depend on the drain having finished.
      void revalidateAll();
      // Room changes published while the bus was degraded never reached this instance: read them.
      live.catchUp();
      // And the changes this instance stored while its own publishes stayed local: tell the others.
      void chat.resync.flush();
      // Positions recorded by other instances meanwhile may be missing from the store: primary reads for a while.
      positions.suspend();
    }),
    chat.listen(),
    realtime.presence.onChatCounts((counts) => {
      const { guests, members, admins } = counts;
      const legacy = encode({ type: 'presence', guests, members, admins });
      const v2 = encode({ type: 'presence', roomId: GENERAL_ROOM_ID, guests, members, admins });
      live.toRoom(GENERAL_ROOM_ID, legacy, (c) => live.isLegacy(c));
      live.toRoom(GENERAL_ROOM_ID, v2, (c) => !live.isLegacy(c));
    }),
    realtime.onUserDisconnect((event) => chat.disconnectUser(event)),
  ];

  registerChatRoutes(app, {
    repo,
    sessions,
    reads,
    onPurged: (userId, deletedCount, changed) => {
      chat.publish({ type: 'messages_purged', userId, deletedCount });
      // Each room's instances catch up with the deletions (replayable as message_deleted frames).
      for (const { roomId, rev } of changed) chat.publish({ type: 'sync', roomId, rev });
    },
  });
  registerRoomRoutes(app, {
    rooms,
    sessions,
    repo,
    reads,
    createLimit,
    publish: (event) => chat.publish(event),
    /** Live removal on this instance now (the bus message reaches the others; see rooms-routes/members.ts). */
    removeLocally: (roomId, userId) => live.removeUser(roomId, userId),
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
      // One last attempt for syncs still owed (bounded: the bus may be gone), then nothing more is sent.
      await Promise.race([chat.resync.flush(), new Promise((r) => setTimeout(r, 500).unref())]);
      chat.resync.stop();
      throttle.close();
      createLimit.close();
      notifier.close();
      roomPresence.close();
      positions.close();
    })();
    return shutdown;
  };
  // The lifecycle runs notify-clients from Fastify's preClose hook, before the HTTP server (whose close would
  // wait for upgraded sockets) is stopped; stop() is idempotent.
  lifecycle.onShutdown('notify-clients', 'chat-sockets', stop);
}
