// The message frames: send (the path the chat latency target is about, its stages timed), edit and delete. Each
// checks the writer, stores the change, records its position for read replicas, then publishes it to every
// instance; the author of a send that does not follow the room is answered directly.
import { performance } from 'node:perf_hooks';
import type { ChatConnection, ChatIdentity } from '../hub.js';
import { type ClientMessage, encode, GENERAL_ROOM_ID, legacyMessage } from '../protocol.js';
import type { Stored } from '../repository.js';
import type { RoomKind } from '../rooms.js';
import type { SendStage, ServiceContext } from './context.js';
import type { WriteChecks } from './write-checks.js';

type Frame<T extends ClientMessage['type']> = Extract<ClientMessage, { type: T }>;

export interface MessageHandlers {
  /** `receivedAt`: performance.now() when the frame arrived (the send's `queued` stage starts there). */
  send_message(conn: ChatConnection, msg: Frame<'send_message'>, receivedAt: number): Promise<void>;
  edit_message(conn: ChatConnection, msg: Frame<'edit_message'>): Promise<void>;
  delete_message(conn: ChatConnection, msg: Frame<'delete_message'>): Promise<void>;
}

export function createMessageHandlers(ctx: ServiceContext, checks: WriteChecks): MessageHandlers {
  const { deps, guard, publish, roomOf } = ctx;
  const { hub, repo, sessionLive, live, rooms, notifier } = deps;
  const changed = deps.changed;
  const { writer, writableText } = checks;

  /** The frame of a stored change for one socket: §6 form on general for a socket that never used rooms. */
  const changeFrame = (
    conn: ChatConnection,
    type: 'new_message' | 'message_updated',
    stored: Stored,
  ): Buffer => {
    const { message } = stored;
    if (message.roomId === GENERAL_ROOM_ID && (!live || live.isLegacy(conn))) {
      return encode({ type, message: legacyMessage(message) });
    }
    return encode({ type, roomId: message.roomId, message, rev: stored.rev });
  };
  /** Edit/delete in a room other than general: a room the caller cannot see answers NOT_FOUND, as a missing one. */
  const canSee = async (conn: ChatConnection, id: ChatIdentity, roomId: string) => {
    if (roomId === GENERAL_ROOM_ID || !rooms) return true;
    const access = await rooms.access(roomId, { userId: id.userId, isAdmin: id.isAdmin });
    if (access && (access.canWrite || id.isAdmin)) return true;
    guard.roomNotFound(conn, roomId);
    return false;
  };

  // Stage timing for send_message only: it is the path the chat latency target is about.
  const stage = deps.onSendStage;
  const since = (from: number, name: SendStage): number => {
    const now = performance.now();
    stage?.(name, (now - from) / 1000);
    return now;
  };

  return {
    async send_message(conn, msg, receivedAt) {
      let t = since(receivedAt, 'queued');
      const w = await writableText(conn, msg.message);
      if (!w) return;
      t = since(t, 'checks');
      const { id, text } = w;
      const roomId = roomOf(conn, msg.roomId);
      try {
        const result = await repo.insert({
          roomId,
          userId: id.userId,
          userName: id.name,
          userAvatar: id.image,
          message: text,
          clientMessageId: msg.clientMessageId,
        });
        if (result.ok === false) {
          since(t, 'store');
          return guard.roomNotFound(conn, roomId);
        }
        const { message, rev, mv } = result;
        // With replicas, part of storing: the frame below must not reach anyone before a history read can show it.
        if (result.created && changed) await changed({ users: [id.userId], rooms: [message.roomId] });
        since(t, 'store');
        // A retried clientMessageId gets its stored message back, to the sender only.
        if (!result.created) return hub.send(conn, changeFrame(conn, 'new_message', result));
        publish({ type: 'new_message', roomId: message.roomId, rev, mv, message });
        // A sender not following the room still learns that (and how) its message was stored.
        if (live && !live.subscription(conn, message.roomId))
          hub.send(conn, changeFrame(conn, 'new_message', result));
        const kind = result.roomKind as RoomKind | undefined;
        if (notifier && kind && (kind === 'direct' || message.message.includes('@'))) {
          void notifier.onMessage(kind, message);
        }
      } catch (err) {
        guard.internal(conn, err, 'store the message');
      }
    },

    async edit_message(conn, msg) {
      const w = await writableText(conn, msg.message);
      if (!w) return;
      const { id, text } = w;
      const roomId = roomOf(conn, msg.roomId);
      try {
        if (!(await canSee(conn, id, roomId))) return;
        const result = await repo.update(
          msg.messageId,
          text,
          { userId: id.userId, isAdmin: id.isAdmin },
          roomId,
        );
        if (result.ok) {
          const { message, rev, mv } = result.value;
          if (changed) await changed({ users: [id.userId], rooms: [roomId] });
          return publish({ type: 'message_updated', roomId, rev, mv, message });
        }
        return guard.refuseMutation(conn, result.reason, 'edit');
      } catch (err) {
        guard.internal(conn, err, 'edit the message');
      }
    },

    async delete_message(conn, msg) {
      const id = writer(conn);
      if (!id) return;
      if (!(await sessionLive(conn, id))) return;
      const roomId = roomOf(conn, msg.roomId);
      try {
        if (!(await canSee(conn, id, roomId))) return;
        const result = await repo.remove(msg.messageId, { userId: id.userId, isAdmin: id.isAdmin }, roomId);
        if (result.ok) {
          const { message, rev, mv } = result.value;
          if (changed) await changed({ users: [id.userId], rooms: [roomId] });
          return publish({
            type: 'message_deleted',
            roomId,
            rev,
            mv,
            messageId: message.id,
            seq: message.seq,
          });
        }
        return guard.refuseMutation(conn, result.reason, 'delete');
      } catch (err) {
        guard.internal(conn, err, 'delete the message');
      }
    },
  };
}
