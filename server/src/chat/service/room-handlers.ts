// The room frames: subscribe (the access rule, then the resume in live/), unsubscribe, mark_read (the read
// position, published to whoever may see it) and typing (throttled per user and room, never echoed to its
// socket).
import type { ChatConnection } from '../hub.js';
import {
  type ChatBusEvent,
  ChatErrorCode,
  ChatLimits,
  type ClientMessage,
  encode,
  GENERAL_ROOM_ID,
} from '../protocol.js';
import type { RoomKind } from '../rooms.js';
import type { ServiceContext } from './context.js';
import type { WriteChecks } from './write-checks.js';

type Frame<T extends ClientMessage['type']> = Extract<ClientMessage, { type: T }>;

export interface RoomHandlers {
  subscribe(conn: ChatConnection, msg: Frame<'subscribe'>): Promise<void>;
  mark_read(conn: ChatConnection, msg: Frame<'mark_read'>): Promise<void>;
  /** Answered at once (no request chain): nothing to store. */
  unsubscribe(conn: ChatConnection, msg: Frame<'unsubscribe'>): void;
  /** Answered at once; the session re-check runs in the background before the event is published. */
  typing(conn: ChatConnection, msg: Frame<'typing'>): void;
}

export function createRoomHandlers(ctx: ServiceContext, checks: WriteChecks): RoomHandlers {
  const { deps, guard, publish, roomOf } = ctx;
  const { hub, sessionLive, typing, logger, live, rooms } = deps;
  const changed = deps.changed;
  const { fail, roomNotFound } = guard;

  return {
    async subscribe(conn, msg) {
      if (!live || !rooms) return fail(conn, ChatErrorCode.UNKNOWN_TYPE, 'Rooms are not available');
      live.upgrade(conn);
      const { roomId } = msg;
      if (!live.subscription(conn, roomId) && live.count(conn) >= ChatLimits.MAX_SUBSCRIPTIONS) {
        return fail(
          conn,
          ChatErrorCode.TOO_MANY_SUBSCRIPTIONS,
          `A socket can follow at most ${ChatLimits.MAX_SUBSCRIPTIONS} rooms`,
        );
      }
      const id = conn.identity;
      let kind: RoomKind = 'general';
      let canWrite = id !== null;
      if (roomId !== GENERAL_ROOM_ID) {
        // Guests read general only.
        if (!id) return roomNotFound(conn, roomId);
        if (!(await sessionLive(conn, id))) return;
        const access = await rooms.access(roomId, { userId: id.userId, isAdmin: id.isAdmin });
        if (!access) return roomNotFound(conn, roomId);
        kind = access.kind;
        canWrite = access.canWrite;
      }
      if (conn.ws.readyState !== conn.ws.OPEN) return;
      try {
        await live.subscribe(conn, roomId, {
          sinceSeq: msg.sinceSeq,
          sinceRev: msg.sinceRev,
          kind,
          canWrite,
        });
      } catch (err) {
        guard.internal(conn, err, 'subscribe to the room');
      }
    },

    async mark_read(conn, msg) {
      if (!rooms) return fail(conn, ChatErrorCode.UNKNOWN_TYPE, 'Rooms are not available');
      live?.upgrade(conn);
      const id = conn.identity;
      if (!id) return fail(conn, ChatErrorCode.UNAUTHORIZED, 'Guests have no read position: sign in');
      if (!(await sessionLive(conn, id))) return;
      try {
        const result = await rooms.markRead(msg.roomId, { userId: id.userId, isAdmin: id.isAdmin }, msg.seq);
        if ('error' in result) return roomNotFound(conn, msg.roomId);
        if (!result.changed) return;
        // The reader's room list shows it (unread counts); the room's history does not change.
        if (changed) await changed({ users: [id.userId] });
        publish({
          type: 'read',
          roomId: msg.roomId,
          userId: id.userId,
          seq: result.lastReadSeq,
          toAll: result.kind === 'direct' || result.kind === 'private',
        });
      } catch (err) {
        guard.internal(conn, err, 'store the read position');
      }
    },

    unsubscribe(conn, msg) {
      live?.upgrade(conn);
      if (!live?.unsubscribe(conn, msg.roomId, 'requested')) {
        hub.send(conn, encode({ type: 'unsubscribed', roomId: msg.roomId, reason: 'requested' }));
      }
    },

    typing(conn, msg) {
      const roomId = roomOf(conn, msg.roomId);
      const id = checks.writer(conn);
      if (!id) return;
      if (roomId !== GENERAL_ROOM_ID && !live?.subscription(conn, roomId)?.canWrite) {
        return roomNotFound(conn, roomId);
      }
      // general keeps the §6 key (forgotten when the user leaves); a room's key is per user and room.
      const typingKey = roomId === GENERAL_ROOM_ID ? id.userId : `${id.userId}:${roomId}`;
      if (!typing.allow(typingKey, msg.isTyping)) return;
      const typingEvent: ChatBusEvent = {
        type: 'typing',
        roomId,
        userId: id.userId,
        userName: id.name,
        isTyping: msg.isTyping,
        exceptConnectionId: conn.id,
      };
      sessionLive(conn, id)
        .then((live) => {
          if (live && conn.ws.readyState === conn.ws.OPEN) publish(typingEvent);
        })
        .catch((err: unknown) => logger.error({ err }, 'chat: session check failed'));
    },
  };
}
