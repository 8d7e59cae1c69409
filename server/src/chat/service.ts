// Owns what happens to each client frame, one module per seam (service/): the per-socket guard (abuse and frame
// windows, the request chain, error replies: socket-guard.ts), who may write (write-checks.ts), the message
// frames with storage and publishing (message-handlers.ts), the room frames (room-handlers.ts), the receive path
// from the bus (receive.ts) and the cache of the history sent on connect (history-cache.ts). This module routes
// each frame to its handler and holds the user-disconnect policy.
import { performance } from 'node:perf_hooks';
import type { RawData } from 'ws';
import { SpanKind, withSpan } from '../infra/tracing.js';
import type { UserDisconnect } from '../realtime/index.js';
import type { ChatConnection } from './hub.js';
import {
  type ChatBusEvent,
  ChatErrorCode,
  CloseCode,
  encode,
  GENERAL_ROOM_ID,
  parseClientFrame,
  roomTopic,
} from './protocol.js';
import type { ChatServiceDeps, ServiceContext } from './service/context.js';
import { createMessageHandlers } from './service/message-handlers.js';
import { createReceive } from './service/receive.js';
import { createResync, type Resync } from './service/resync.js';
import { createRoomHandlers } from './service/room-handlers.js';
import { createSocketGuard } from './service/socket-guard.js';
import { createWriteChecks } from './service/write-checks.js';

export type { ChatServiceDeps, SendStage } from './service/context.js';
export {
  createHistoryCache,
  type GeneralSnapshot,
  type HistoryCache,
} from './service/history-cache.js';

export interface ChatService {
  /** Starts the service's per-socket state (abuse and frame windows count from here). */
  open(conn: ChatConnection): void;
  onFrame(conn: ChatConnection, data: RawData, isBinary: boolean): void;
  /** Resolves once the socket's queued requests have run (tests, diagnostics). */
  idle(conn: ChatConnection): Promise<void>;
  /** Sends a chat event to every instance; `listen` delivers it (and other instances' events) to local sockets. */
  publish(event: ChatBusEvent): void;
  /** A chat event from the bus (any topic of chat, any instance); validated here. */
  receive(payload: unknown): void;
  /** Subscribes the receive path to the bus; returns the unsubscribe function. */
  listen(): () => void;
  /**
   * The user-disconnect policy: closes the user's sockets (one session's only, for a one-device sign-out) and
   * tells peers about user-wide disconnections.
   */
  disconnectUser(event: UserDisconnect): void;
  /** Sends an `error` and counts it towards the abuse limit. */
  fail(conn: ChatConnection, code: ChatErrorCode, message: string): void;
  /** Room syncs owed for changes that reached this instance only (flushed when the bus recovers). */
  resync: Pick<Resync, 'flush' | 'owed' | 'stop'>;
}

function frameText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

export function createChatService(deps: ChatServiceDeps): ChatService {
  const { hub, bus, typing, logger, live } = deps;
  const guard = createSocketGuard({ hub, logger, frameLimit: deps.frameLimit });
  const receive = createReceive(deps);
  const resync = createResync({
    publishSync: (roomId, rev) => bus.publish(roomTopic(roomId), { type: 'sync', roomId, rev }),
    isDegraded: () => bus.isDegraded(),
    logger,
  });
  const ctx: ServiceContext = {
    deps,
    guard,
    publish(event) {
      const roomId = 'roomId' in event ? event.roomId : GENERAL_ROOM_ID;
      bus
        .publish(roomTopic(roomId), event)
        .then((reached) => {
          // Only a change with a revision can be read back from PostgreSQL by the instances it missed.
          if (!reached && 'rev' in event) resync.owe(roomId, event.rev);
        })
        .catch((err: unknown) => logger.error({ err }, 'chat: publish failed'));
    },
    roomOf(conn, roomId) {
      if (roomId === undefined) return GENERAL_ROOM_ID;
      live?.upgrade(conn);
      return roomId;
    },
  };
  const checks = createWriteChecks(ctx);
  const messages = createMessageHandlers(ctx, checks);
  const rooms = createRoomHandlers(ctx, checks);
  const { fail, enqueue } = guard;

  return {
    fail,
    resync,
    publish: ctx.publish,
    receive,
    open: guard.open,
    idle: guard.idle,
    listen: () => bus.subscribe(roomTopic(GENERAL_ROOM_ID), receive),
    disconnectUser(event) {
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
    },
    onFrame(conn, data, isBinary) {
      // Already closed as abusive, or closing for any reason: what the peer still sends is not read.
      if (guard.abusive(conn) || conn.ws.readyState !== conn.ws.OPEN) return;
      if (guard.overFrameBudget(conn)) return;
      if (isBinary)
        return fail(conn, ChatErrorCode.BINARY_NOT_SUPPORTED, 'Only text frames of JSON are accepted');
      const parsed = parseClientFrame(frameText(data));
      if (!parsed.ok) return fail(conn, parsed.code, parsed.message);
      const msg = parsed.message;
      switch (msg.type) {
        case 'ping':
          hub.send(conn, encode({ type: 'pong', timestamp: new Date().toISOString() }));
          return;
        case 'typing':
          return rooms.typing(conn, msg);
        case 'send_message': {
          const receivedAt = performance.now();
          // A span per send (no HTTP request carries it): the store and database calls are its children.
          return enqueue(conn, () =>
            withSpan(
              'chat.send_message',
              { 'herald.chat.connection_id': String(conn.id) },
              () => messages.send_message(conn, msg, receivedAt),
              SpanKind.SERVER,
            ),
          );
        }
        case 'edit_message':
          return enqueue(conn, () => messages.edit_message(conn, msg));
        case 'delete_message':
          return enqueue(conn, () => messages.delete_message(conn, msg));
        case 'subscribe':
          return enqueue(conn, () => rooms.subscribe(conn, msg));
        case 'unsubscribe':
          return rooms.unsubscribe(conn, msg);
        case 'mark_read':
          return enqueue(conn, () => rooms.mark_read(conn, msg));
      }
    },
  };
}
