// Owns per-room presence (§6.1 `presence { roomId, online }`): which members have a socket subscribed to a room,
// cluster-wide. Each instance records `<userId>|<instanceId>` in the room's set in the store when a user's first
// local socket subscribes and removes it after the last one leaves; readers ignore entries of instances the
// registry no longer lists (a crashed instance's entries are dropped lazily). Changes are announced on the room's
// own bus topic, debounced, and every instance with subscribers recounts. Without a store (or while it is
// down) the counts are this instance's own.
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { encode } from './protocol.js';

/** `userIds` are listed in the frame up to this many online members (a direct or small room shows who). */
const LIST_USERS_UP_TO = 50;
const LIVE_INSTANCES_TTL_MS = 2_000;

export interface RoomPresenceDeps {
  store: Store;
  instanceId: string;
  debounceMs: number;
  /** Instances the registry lists as alive. */
  liveInstances(): Promise<string[]>;
  /** This instance's local users of a room (the fallback when the store cannot answer). */
  localUsers(roomId: string): string[];
  /** Announces that the room's presence changed (published on the room's topic). */
  announce(roomId: string): void;
  /** Sends the encoded frame to the room's local subscribers. */
  deliver(roomId: string, frame: Buffer): void;
  logger: Logger;
}

export interface RoomPresence {
  userJoined(roomId: string, userId: string): void;
  userLeft(roomId: string, userId: string): void;
  /** Users with a socket subscribed to the room anywhere. */
  onlineUsers(roomId: string): Promise<Set<string>>;
  /** The `presence` frame of the room now. */
  snapshot(roomId: string): Promise<Buffer>;
  /** A `presence_changed` arrived for the room: recount and tell local subscribers (debounced). */
  changed(roomId: string): void;
  /** Removes this instance's entries (shutdown). */
  clear(rooms: Iterable<[string, string[]]>): Promise<void>;
  close(): void;
}

export function createRoomPresence(deps: RoomPresenceDeps): RoomPresence {
  const redis = deps.store.redis?.data;
  const key = (roomId: string) => `${deps.store.prefix}chat:online:{${roomId}}`;
  const entry = (userId: string) => `${userId}|${deps.instanceId}`;
  const announceTimers = new Map<string, NodeJS.Timeout>();
  const recountTimers = new Map<string, NodeJS.Timeout>();
  let live: { at: number; ids: Promise<Set<string>> } | undefined;
  let closed = false;

  const liveInstances = () => {
    const now = Date.now();
    if (!live || now - live.at > LIVE_INSTANCES_TTL_MS) {
      live = {
        at: now,
        ids: deps
          .liveInstances()
          .then((ids) => new Set([...ids, deps.instanceId]))
          .catch(() => new Set([deps.instanceId])),
      };
    }
    return live.ids;
  };

  const usable = () => redis !== undefined && deps.store.isReady();

  const announceSoon = (roomId: string) => {
    if (closed || announceTimers.has(roomId)) return;
    const timer = setTimeout(() => {
      announceTimers.delete(roomId);
      deps.announce(roomId);
    }, deps.debounceMs);
    timer.unref();
    announceTimers.set(roomId, timer);
  };

  const write = (op: 'sadd' | 'srem', roomId: string, userId: string) => {
    if (!usable() || !redis) {
      announceSoon(roomId);
      return;
    }
    redis[op](key(roomId), entry(userId))
      .catch((err: unknown) =>
        deps.logger.warn({ err: (err as Error).message, roomId }, 'chat: room presence write failed'),
      )
      .finally(() => announceSoon(roomId));
  };

  const onlineUsers = async (roomId: string): Promise<Set<string>> => {
    const local = new Set(deps.localUsers(roomId));
    if (!usable() || !redis) return local;
    try {
      const [entries, alive] = await Promise.all([redis.smembers(key(roomId)), liveInstances()]);
      const users = new Set(local);
      const stale: string[] = [];
      for (const e of entries) {
        const bar = e.lastIndexOf('|');
        const instance = e.slice(bar + 1);
        if (alive.has(instance)) users.add(e.slice(0, bar));
        else stale.push(e);
      }
      if (stale.length > 0) void redis.srem(key(roomId), ...stale).catch(() => {});
      return users;
    } catch {
      return local;
    }
  };

  const snapshot = async (roomId: string) => {
    const users = await onlineUsers(roomId);
    return encode(
      users.size <= LIST_USERS_UP_TO
        ? { type: 'presence', roomId, online: users.size, userIds: [...users].sort() }
        : { type: 'presence', roomId, online: users.size },
    );
  };

  return {
    userJoined: (roomId, userId) => write('sadd', roomId, userId),
    userLeft: (roomId, userId) => write('srem', roomId, userId),
    onlineUsers,
    snapshot,
    changed(roomId) {
      if (closed || recountTimers.has(roomId)) return;
      const timer = setTimeout(() => {
        recountTimers.delete(roomId);
        if (deps.localUsers(roomId).length === 0) return;
        snapshot(roomId)
          .then((frame) => deps.deliver(roomId, frame))
          .catch((err: unknown) => deps.logger.warn({ err, roomId }, 'chat: room presence count failed'));
      }, deps.debounceMs);
      timer.unref();
      recountTimers.set(roomId, timer);
    },
    async clear(rooms) {
      if (!usable() || !redis) return;
      await Promise.all(
        [...rooms].map(([roomId, users]) =>
          users.length > 0 ? redis.srem(key(roomId), ...users.map(entry)).catch(() => 0) : 0,
        ),
      );
    },
    close() {
      closed = true;
      for (const t of announceTimers.values()) clearTimeout(t);
      for (const t of recountTimers.values()) clearTimeout(t);
      announceTimers.clear();
      recountTimers.clear();
    },
  };
}
