// The shapes of this instance's live room state: the public handle (RoomLive) and its dependencies, and the
// per-room pipe, per-socket subscription and change records its parts share.
import type { Logger } from '../../infra/logger.js';
import type { Bus } from '../../realtime/index.js';
import type { ChatConnection, ChatHub } from '../hub.js';
import type { ChatBusEvent, RoomChange, RoomMessage } from '../protocol.js';
import type { ChatRepository, RoomHead } from '../repository.js';
import type { RoomKind } from '../rooms.js';

/** One change of a room, from the bus or from PostgreSQL. */
export interface Change {
  rev: number;
  /** The room's members version when the change was stored (0 when unknown: a replayed change). */
  mv: number;
  kind: 'created' | 'updated' | 'deleted';
  seq: number;
  messageId: string;
  message?: RoomMessage;
  /** Encoded frames, built on first use and shared by every socket. */
  v2?: Buffer | null;
  legacy?: Buffer | null;
}

export interface Sub {
  /** The last revision this socket was given (or skipped: nothing at or below it is sent again). */
  rev: number;
  /** Changes held while the subscription's replay is being sent; null once live. */
  buffer: Change[] | null;
  /** §6 frames (a socket that never used rooms, on `general`). */
  legacy: boolean;
  canWrite: boolean;
}

export interface Pipe {
  roomId: string;
  kind: RoomKind;
  /** The last revision delivered; null until the first subscriber's read told where the room is. */
  lastRev: number | null;
  /** A revision known to exist (a `sync`, the head read on bus recovery): a gap until delivered. */
  want: number;
  membersVersion: number;
  pending: Map<number, Change>;
  /** When the current gap among bus arrivals was first seen (0: none). */
  gapSince: number;
  busy: boolean;
  failures: number;
  subs: Map<ChatConnection, Sub>;
  /** Local subscribers per user (presence). */
  users: Map<string, number>;
  leave?: () => void;
  joined?: Promise<void>;
}

export interface RoomPresenceHooks {
  userJoined(roomId: string, userId: string): void;
  userLeft(roomId: string, userId: string): void;
  /** The room's presence frame for a new subscriber (null: unknown yet). */
  snapshot(roomId: string): Promise<Buffer | null>;
}

export interface RoomLiveDeps {
  hub: ChatHub;
  bus: Bus;
  repo: ChatRepository;
  /** Which of these users are members of the room now. */
  membersAmong(roomId: string, userIds: string[]): Promise<Set<string>>;
  /** The general room's snapshot for a new socket (cached per instance). */
  generalSnapshot(): Promise<{ messages: RoomMessage[]; head: RoomHead }>;
  /** Called for every change of `general` (the snapshot cache is stale). */
  onGeneralChange(): void;
  /** Delivers an event of any room received from the bus (the service parses and routes). */
  onBusEvent(payload: unknown): void;
  presence?: RoomPresenceHooks;
  logger: Logger;
}

export interface SubscribeOptions {
  sinceSeq?: number;
  sinceRev?: number;
  kind: RoomKind;
  canWrite: boolean;
}

export interface RoomLive {
  /** Subscribes (again) and sends `subscribed`, the replay, then live frames. */
  subscribe(conn: ChatConnection, roomId: string, options: SubscribeOptions): Promise<void>;
  /** The §6 greeting's `general` part: `message_history`, then live frames. */
  attachGeneral(conn: ChatConnection, legacy: boolean): Promise<void>;
  unsubscribe(conn: ChatConnection, roomId: string, reason: 'requested' | 'removed'): boolean;
  /** Drops every subscription of a closed socket. */
  detach(conn: ChatConnection): void;
  subscription(conn: ChatConnection, roomId: string): { canWrite: boolean } | undefined;
  count(conn: ChatConnection): number;
  /** The socket switches to §6.1 frames on `general` (it used a room frame). */
  upgrade(conn: ChatConnection): void;
  isLegacy(conn: ChatConnection): boolean;
  /** A room change from the bus (any instance, this one included). */
  change(event: RoomChange | Extract<ChatBusEvent, { type: 'sync' }>): void;
  /** Sends pre-encoded bytes to the room's local subscribers (typing, read, presence). */
  toRoom(roomId: string, data: Buffer, filter?: (conn: ChatConnection) => boolean): void;
  /** A member left or was removed: their subscriptions of the room end on this instance now. */
  removeUser(roomId: string, userId: string): void;
  /** Rooms with subscribers here and their local users (presence). */
  localUsers(roomId: string): string[];
  rooms(): string[];
  /** The bus recovered: catch every pipe up with PostgreSQL. */
  catchUp(): void;
  stats(): { rooms: number; subscriptions: number };
}
