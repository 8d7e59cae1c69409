// Owns notifications from chat (§6.1): a direct message, or an `@username` mention of a room member, notifies each
// recipient who has no socket subscribed to that room, through the notification pipeline (so SSE, email and push
// reach them as their preferences allow) — at most one per room per recipient per fold window (store-backed key
// with a lifetime; a per-instance window while the store is down).
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import type { RoomMessage } from './protocol.js';
import type { RoomKind } from './rooms.js';

/** `@` + a username (the username plugin's characters), not inside a word or an email address. */
const MENTION = /(?<![\w@.])@([A-Za-z0-9_.]{3,30})(?![\w])/g;
const MAX_MENTIONS = 10;

/** What chat needs of the notifications feature (its service, passed in by the composition of chat). */
export interface ChatNotificationSink {
  createForUser(
    userId: string,
    input: {
      type: 'message' | 'mention';
      title: string;
      content: string;
      metadata: {
        actions: Array<{ actionId: string; type: 'link'; label: string; url: string }>;
        data: { roomId: string; seq: number };
      };
    },
  ): Promise<unknown>;
}

export interface ChatNotifierDeps {
  sink: ChatNotificationSink;
  store: Store;
  foldMs: number;
  /** The other members of a direct room. */
  memberIds(roomId: string, limit: number): Promise<string[]>;
  membersByUsername(roomId: string, usernames: string[]): Promise<Array<{ userId: string; name: string }>>;
  roomName(roomId: string): Promise<string>;
  onlineUsers(roomId: string): Promise<Set<string>>;
  logger: Logger;
}

export function mentionedUsernames(text: string): string[] {
  const names = new Set<string>();
  for (const m of text.matchAll(MENTION)) {
    const name = m[1]?.replace(/\.+$/, '').toLowerCase();
    if (name && name.length >= 3) names.add(name);
    if (names.size >= MAX_MENTIONS) break;
  }
  return [...names];
}

export interface ChatNotifier {
  /** Called after a message was stored; never throws (failures are logged). */
  onMessage(kind: RoomKind, message: RoomMessage): Promise<void>;
  close(): void;
}

export function createChatNotifier(deps: ChatNotifierDeps): ChatNotifier {
  const local = new Map<string, number>();
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [k, until] of local) if (until <= now) local.delete(k);
  }, deps.foldMs);
  sweep.unref();

  /** True for the first notification of this room to this user in the window. */
  const firstInWindow = async (roomId: string, userId: string): Promise<boolean> => {
    const k = `chat:notify:${roomId}:${userId}`;
    if (deps.store.isReady()) {
      try {
        const { count } = await deps.store.incrWindow(k, deps.foldMs);
        return count === 1;
      } catch (err) {
        deps.logger.warn({ err: (err as Error).message }, 'chat notify: store unavailable, folding locally');
      }
    }
    const now = Date.now();
    const until = local.get(k);
    if (until !== undefined && until > now) return false;
    local.set(k, now + deps.foldMs);
    return true;
  };

  const run = async (kind: RoomKind, message: RoomMessage) => {
    const roomId = message.roomId;
    const recipients = new Map<string, 'message' | 'mention'>();
    if (kind === 'direct') {
      for (const id of await deps.memberIds(roomId, 10))
        if (id !== message.userId) recipients.set(id, 'message');
    } else {
      const names = mentionedUsernames(message.message);
      if (names.length === 0) return;
      for (const m of await deps.membersByUsername(roomId, names)) {
        if (m.userId !== message.userId) recipients.set(m.userId, 'mention');
      }
    }
    if (recipients.size === 0) return;
    const online = await deps.onlineUsers(roomId);
    const targets = [...recipients].filter(([userId]) => !online.has(userId));
    if (targets.length === 0) return;
    const roomName = kind === 'direct' ? '' : await deps.roomName(roomId);
    await Promise.all(
      targets.map(async ([userId, type]) => {
        if (!(await firstInWindow(roomId, userId))) return;
        await deps.sink.createForUser(userId, {
          type,
          title:
            type === 'message'
              ? `New message from ${message.userName}`.slice(0, 255)
              : `${message.userName} mentioned you in ${roomName}`.slice(0, 255),
          content: message.message,
          metadata: {
            actions: [
              {
                actionId: 'open-room',
                type: 'link',
                label: 'Open conversation',
                url: `/chat?room=${encodeURIComponent(roomId)}`,
              },
            ],
            data: { roomId, seq: message.seq },
          },
        });
      }),
    );
  };

  return {
    async onMessage(kind, message) {
      try {
        await run(kind, message);
      } catch (err) {
        deps.logger.warn({ err, roomId: message.roomId }, 'chat: notification from chat failed');
      }
    },
    close() {
      clearInterval(sweep);
    },
  };
}
