// Owns the names of every real-time key and channel in the store; all of them start with the store prefix.
// Redis Cluster: the registry and every instance's presence share the hash tag `{rt}` because the registry's and
// presence's scripts read and delete them together (one slot, one shard); bus channels carry no tag, each one
// is sharded on its own name (docs/architecture.md, "Redis Cluster"). On one Redis the names stay untagged, as
// before, so a rolling upgrade keeps every instance in the same registry.

/** Notification fan-out channels: enough that a 3- to 6-master cluster gets several on each shard. */
export const NOTIFICATION_CHANNELS = 16;

export function realtimeKeys(prefix: string, options: { cluster?: boolean } = {}) {
  const base = `${prefix}rt:`;
  const tagged = options.cluster ? `${prefix}{rt}:` : base;
  const instance = (id: string) => `${tagged}instance:${id}`;
  const online = (id: string) => `${tagged}presence:${id}:online`;
  const members = (id: string) => `${tagged}presence:${id}:members`;
  const admins = (id: string) => `${tagged}presence:${id}:admins`;
  const guests = (id: string) => `${tagged}presence:${id}:guests`;
  return {
    /** Control channel (presence, user disconnections, anything not routed below); the others derive from it. */
    channel: `${base}bus`,
    /** Sorted set: member instance id, score its last heartbeat (epoch ms). Listing never needs KEYS. */
    instances: `${tagged}instances`,
    instance,
    online,
    members,
    admins,
    guests,
    presenceKeys(id: string): string[] {
      return [online(id), members(id), admins(id), guests(id)];
    },
  };
}

export type RealtimeKeys = ReturnType<typeof realtimeKeys>;

/** Every bus channel under a control channel name: control, chat, then the notification channels. */
export function busChannels(control: string, notificationChannels = NOTIFICATION_CHANNELS) {
  const notifications = Array.from({ length: notificationChannels }, (_, k) => `${control}:n:${k}`);
  return {
    control,
    chat: `${control}:chat`,
    notifications,
    all: [control, `${control}:chat`, ...notifications],
  };
}

/** Topics of chat rooms other than `general`; each travels on a channel of its own (`<control>:room:<id>`). */
export const ROOM_TOPIC_PREFIX = 'chat.room.';

/** FNV-1a: a cheap, stable spread of user ids over the notification channels (same on every instance). */
export function hash32(value: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The channel a message travels on. Chat has its own channel (one ordered stream, like one room); `rt.*` and test
 * topics the control channel; notification messages go to `n:<hash(userId) mod K>` so one user's events stay in
 * order on one channel while users spread over the shards; messages without a user (batches, syncs) spread by
 * their message id.
 */
export function channelFor(
  channels: ReturnType<typeof busChannels>,
  topic: string,
  payload: unknown,
  messageId: string,
): string {
  // A room's own channel: only instances with a subscriber of that room listen on it (sharded on a cluster).
  if (topic.startsWith(ROOM_TOPIC_PREFIX))
    return `${channels.control}:room:${topic.slice(ROOM_TOPIC_PREFIX.length)}`;
  if (topic.startsWith('chat.')) return channels.chat;
  if (topic.startsWith('rt.') || topic.startsWith('test.')) return channels.control;
  const userId =
    typeof payload === 'object' && payload !== null ? (payload as { userId?: unknown }).userId : undefined;
  const key = typeof userId === 'string' ? userId : messageId;
  return channels.notifications[hash32(key) % channels.notifications.length] ?? channels.control;
}
