// The real-time core's public surface. Notifications, chat, admin and ops code against these interfaces only.
import type { Bus } from './bus.js';

export type ChatRole = 'guest' | 'member' | 'admin';

export interface PresenceCounts {
  guests: number;
  members: number;
  admins: number;
}

export interface Presence {
  /**
   * Marks a user reachable for live notification delivery on this instance (a notification SSE stream; chat
   * sockets do not count, they receive no notifications). Ref-counted locally and reflected cluster-wide; call
   * the returned function when the connection ends.
   */
  userConnected(userId: string): () => void;
  /** True when the user holds a notification stream on any live instance. */
  isOnline(userId: string): Promise<boolean>;
  /** Batch form for broadcasts: the subset of `userIds` online anywhere. */
  onlineAmong(userIds: string[]): Promise<Set<string>>;
  /**
   * Every user holding a notification stream on a live instance (a broadcast reaches them first). On a store
   * failure, the users of this instance only: the caller treats the answer as an ordering hint, never as a list
   * of recipients.
   */
  onlineUsers(): Promise<string[]>;
  /** Refreshes the user's presence lifetime (POST /notification/heartbeat). */
  touch(userId: string): Promise<void>;

  /** Chat connection accounting: guests counted per connection, members/admins as distinct users. */
  chatJoin(connectionId: string, role: ChatRole, userId: string | null): void;
  chatLeave(connectionId: string): void;
  /** Current cluster-wide chat counts, computed now over every live instance's sets (cost grows with users). */
  chatCounts(): Promise<PresenceCounts>;
  /**
   * The cluster-wide counts last computed by the debounced refresh (what clients were last sent), for the
   * per-connect greeting: O(1), no store round trip once the first refresh has run. The refresh that follows
   * a join broadcasts the updated counts, so a greeted client converges like everyone else.
   */
  lastChatCounts(): Promise<PresenceCounts>;
  /** Called (debounced, at most every PRESENCE_DEBOUNCE_MS) when cluster-wide chat counts change. */
  onChatCounts(handler: (counts: PresenceCounts) => void): () => void;
  /** Number of local chat connections (for /metrics and the registry). */
  localChatConnections(): number;
}

export interface UserDisconnect {
  userId: string;
  /** `account_changed`: an admin changed the user's role or profile; connections should reconnect. */
  reason: 'banned' | 'signed_out' | 'session_revoked' | 'password_reset' | 'account_changed' | string;
  /** When set, only this session's connections close (sign-out of one device). */
  sessionId?: string;
}

/** One live instance as recorded in the cluster registry (epoch ms). */
export interface InstanceRecord {
  instanceId: string;
  startedAt: number;
  lastHeartbeat: number;
  connectedClients: number;
}

export interface Realtime {
  bus: Bus;
  presence: Presence;
  /** Fans out to every instance (including this one); each closes that user's local SSE streams and sockets. */
  disconnectUser(event: UserDisconnect): Promise<void>;
  onUserDisconnect(handler: (event: UserDisconnect) => void): () => void;
  /**
   * Called each time the bus leaves degraded mode (store reachable again, channel re-subscribed). Messages
   * published meanwhile never reached other instances, so holders of live connections re-validate them here
   * (chat sockets, SSE streams via `revocation.isSessionLive`). Never called without a distributed bus.
   */
  onRecovered(handler: () => void): () => void;
  /** Called each time the bus enters degraded mode (the store became unreachable). */
  onDegraded(handler: () => void): () => void;
  /** Live instances of the cluster, this one included (only this one when not distributed). */
  instances(): Promise<InstanceRecord[]>;
  /** True when a store is configured and ENABLE_DISTRIBUTED_CHAT is on. */
  distributed: boolean;
  /** When this instance's real-time core started (epoch ms). */
  startedAt: number;
}
