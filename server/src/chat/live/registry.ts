// Who follows which room on this instance: a pipe per room (joined to the room's bus topic while it has local
// subscribers; `general` always), each socket's subscriptions, the sockets that speak §6.1 on `general`, and the
// room presence hooks fired on a user's first and last local subscription of a room.
import type { Bus } from '../../realtime/index.js';
import type { ChatConnection } from '../hub.js';
import { GENERAL_ROOM_ID, roomTopic } from '../protocol.js';
import type { RoomKind } from '../rooms.js';
import type { Pipe, RoomPresenceHooks, Sub } from './types.js';

export interface SubscriptionRegistryDeps {
  bus: Bus;
  onBusEvent(payload: unknown): void;
  presence?: RoomPresenceHooks;
}

export interface SubscriptionRegistry {
  pipes: Map<string, Pipe>;
  /** Each socket's subscriptions by room. */
  bySocket: WeakMap<ChatConnection, Map<string, Sub>>;
  /** Sockets that used a room frame (§6.1 on `general`). */
  aware: WeakSet<ChatConnection>;
  /** The room's pipe, created and joined to the room's topic when it had none. */
  ensurePipe(roomId: string, kind: RoomKind): Promise<Pipe>;
  /** Takes a pipe without subscribers off the map and the bus. */
  release(pipe: Pipe): void;
  register(pipe: Pipe, conn: ChatConnection, sub: Sub): void;
  /** Ends one subscription; false when there was none. */
  drop(pipe: Pipe, conn: ChatConnection): boolean;
  /** Subscriptions on this instance. */
  subscriptions(): number;
}

const newPipe = (roomId: string, kind: RoomKind): Pipe => ({
  roomId,
  kind,
  lastRev: null,
  want: 0,
  membersVersion: 0,
  pending: new Map(),
  gapSince: 0,
  busy: false,
  failures: 0,
  subs: new Map(),
  users: new Map(),
});

export function createSubscriptionRegistry(deps: SubscriptionRegistryDeps): SubscriptionRegistry {
  const { bus } = deps;
  const pipes = new Map<string, Pipe>();
  const bySocket = new WeakMap<ChatConnection, Map<string, Sub>>();
  let subscriptions = 0;
  // `general` always has its pipe: every instance listens on its topic.
  pipes.set(GENERAL_ROOM_ID, newPipe(GENERAL_ROOM_ID, 'general'));

  const release = (pipe: Pipe) => {
    pipes.delete(pipe.roomId);
    pipe.leave?.();
  };

  return {
    pipes,
    bySocket,
    aware: new WeakSet<ChatConnection>(),
    release,
    subscriptions: () => subscriptions,

    async ensurePipe(roomId, kind) {
      let pipe = pipes.get(roomId);
      if (!pipe) {
        const created = newPipe(roomId, kind);
        pipes.set(roomId, created);
        created.joined = bus
          .join(roomTopic(roomId), (payload) => deps.onBusEvent(payload))
          .then((leave) => {
            // The last subscriber may have left while the subscription was being set up.
            if (pipes.get(roomId) === created) created.leave = leave;
            else leave();
          });
        pipe = created;
      }
      pipe.kind = kind;
      await pipe.joined;
      return pipe;
    },

    register(pipe, conn, sub) {
      if (pipe.subs.has(conn)) {
        // Subscribing again replaces the socket's subscription in place. Dropping it first would, for the room's
        // only subscriber here, tear the pipe down (off the map and the bus) and register on the orphan: the room
        // would go silent on this socket. Presence and the counters are unchanged: same socket, same user.
        pipe.subs.set(conn, sub);
        bySocket.get(conn)?.set(pipe.roomId, sub);
        return;
      }
      pipe.subs.set(conn, sub);
      let mine = bySocket.get(conn);
      if (!mine) {
        mine = new Map();
        bySocket.set(conn, mine);
      }
      mine.set(pipe.roomId, sub);
      subscriptions++;
      const userId = conn.identity?.userId;
      if (userId) {
        const n = pipe.users.get(userId) ?? 0;
        pipe.users.set(userId, n + 1);
        if (n === 0 && pipe.roomId !== GENERAL_ROOM_ID) deps.presence?.userJoined(pipe.roomId, userId);
      }
    },

    drop(pipe, conn) {
      const sub = pipe.subs.get(conn);
      if (!sub) return false;
      pipe.subs.delete(conn);
      bySocket.get(conn)?.delete(pipe.roomId);
      subscriptions--;
      const userId = conn.identity?.userId;
      if (userId) {
        const n = (pipe.users.get(userId) ?? 1) - 1;
        if (n <= 0) {
          pipe.users.delete(userId);
          if (pipe.roomId !== GENERAL_ROOM_ID) deps.presence?.userLeft(pipe.roomId, userId);
        } else pipe.users.set(userId, n);
      }
      if (pipe.subs.size === 0) {
        if (pipe.roomId === GENERAL_ROOM_ID) {
          // Nobody to deliver to: start over from the next subscriber's read instead of chasing gaps.
          pipe.lastRev = null;
          pipe.pending.clear();
        } else release(pipe);
      }
      return true;
    },
  };
}
