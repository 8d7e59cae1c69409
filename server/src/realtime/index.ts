// Builds the real-time core for one instance. PLACEHOLDER single-instance version: the real-time issue replaces
// this with the Redis bus, degraded mode, registry and cluster-wide presence behind the same interfaces.
import type { Config } from '../config.js';
import type { Store } from '../infra/cache.js';
import type { Logger } from '../infra/logger.js';
import { createMemoryBus } from './bus.js';
import type { ChatRole, Presence, PresenceCounts, Realtime, UserDisconnect } from './types.js';

export interface RealtimeDeps {
  config: Config;
  store: Store;
  logger: Logger;
}

const USER_DISCONNECT_TOPIC = 'user.disconnect';

export function createRealtime({ config, logger }: RealtimeDeps): Realtime {
  const bus = createMemoryBus(config.INSTANCE_ID, (topic, err) =>
    logger.error({ topic, err }, 'bus handler failed'),
  );
  const online = new Map<string, number>();
  const chat = new Map<string, { role: ChatRole; userId: string | null }>();
  const chatHandlers = new Set<(c: PresenceCounts) => void>();
  let timer: NodeJS.Timeout | undefined;
  const counts = (): PresenceCounts => {
    const members = new Set<string>();
    const admins = new Set<string>();
    let guests = 0;
    for (const c of chat.values()) {
      if (c.role === 'guest' || !c.userId) guests++;
      else (c.role === 'admin' ? admins : members).add(c.userId);
    }
    return { guests, members: members.size, admins: admins.size };
  };
  const changed = () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      const c = counts();
      for (const h of chatHandlers) h(c);
    }, config.PRESENCE_DEBOUNCE_MS);
    timer.unref();
  };
  const presence: Presence = {
    userConnected(userId) {
      online.set(userId, (online.get(userId) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const n = (online.get(userId) ?? 1) - 1;
        if (n <= 0) online.delete(userId);
        else online.set(userId, n);
      };
    },
    isOnline: async (userId) => online.has(userId),
    onlineAmong: async (userIds) => new Set(userIds.filter((id) => online.has(id))),
    touch: async () => {},
    chatJoin(connectionId, role, userId) {
      chat.set(connectionId, { role, userId });
      changed();
    },
    chatLeave(connectionId) {
      if (chat.delete(connectionId)) changed();
    },
    chatCounts: async () => counts(),
    onChatCounts(handler) {
      chatHandlers.add(handler);
      return () => chatHandlers.delete(handler);
    },
    localChatConnections: () => chat.size,
  };
  return {
    bus,
    presence,
    disconnectUser: (event: UserDisconnect) => bus.publish(USER_DISCONNECT_TOPIC, event),
    onUserDisconnect: (handler) =>
      bus.subscribe<UserDisconnect>(USER_DISCONNECT_TOPIC, (payload) => handler(payload)),
  };
}
