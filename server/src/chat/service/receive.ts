// The receive path: a chat event from the bus (any topic of chat, any instance, this one included) is validated
// and handed to local delivery: room changes to the live pipes (or, without rooms, to every socket in §6 form),
// typing and read positions to the room's subscribers, removals and presence to their owners.
import type { ChatConnection } from '../hub.js';
import {
  type ChatBusEvent,
  ChatBusEventSchema,
  encode,
  GENERAL_ROOM_ID,
  legacyMessage,
} from '../protocol.js';
import type { ChatServiceDeps } from './context.js';

export type ReceiveDeps = Pick<ChatServiceDeps, 'hub' | 'history' | 'logger' | 'live' | 'onRoomPresence'>;

export function createReceive(deps: ReceiveDeps): (payload: unknown) => void {
  const { hub, history, logger, live } = deps;

  /** Without the rooms layer (unit tests): §6 frames to every socket. */
  const legacyBroadcast = (
    event: Extract<ChatBusEvent, { rev: number }> | Extract<ChatBusEvent, { type: 'sync' }>,
  ) => {
    if (event.type === 'sync') return;
    if (event.type === 'message_deleted')
      hub.broadcast(encode({ type: 'message_deleted', messageId: event.messageId }));
    else hub.broadcast(encode({ type: event.type, message: legacyMessage(event.message) }));
  };

  /** A chat event from any instance (this one included), validated: another instance or the store could send anything. */
  return (payload: unknown) => {
    const parsed = ChatBusEventSchema.safeParse(payload);
    if (!parsed.success) {
      logger.warn({ issues: parsed.error.issues.slice(0, 3) }, 'chat: malformed bus event dropped');
      return;
    }
    const event = parsed.data;
    switch (event.type) {
      case 'new_message':
      case 'message_updated':
      case 'message_deleted':
      case 'sync':
        if (event.roomId === GENERAL_ROOM_ID) history.invalidate();
        if (live) live.change(event);
        else legacyBroadcast(event);
        return;
      case 'messages_purged':
        history.invalidate();
        hub.broadcast(encode(event));
        return;
      case 'typing': {
        const { exceptConnectionId, roomId, ...out } = event;
        const notSelf = (c: ChatConnection) => c.id !== exceptConnectionId;
        if (!live) return hub.broadcast(encode(out), exceptConnectionId);
        if (roomId === GENERAL_ROOM_ID) {
          const legacy = encode(out);
          const v2 = encode({ ...out, roomId });
          live.toRoom(roomId, legacy, (c) => notSelf(c) && live.isLegacy(c));
          live.toRoom(roomId, v2, (c) => notSelf(c) && !live.isLegacy(c));
        } else live.toRoom(roomId, encode({ ...out, roomId }), notSelf);
        return;
      }
      case 'read': {
        const { toAll, ...out } = event;
        const frame = encode(out);
        live?.toRoom(event.roomId, frame, (c) => toAll || c.identity?.userId === event.userId);
        return;
      }
      case 'member_removed':
        live?.removeUser(event.roomId, event.userId);
        return;
      case 'presence_changed':
        deps.onRoomPresence?.(event.roomId);
        return;
    }
  };
}
