// What the chat service's parts are given: the service's dependencies (the public ChatServiceDeps) and, for the
// frame handlers, the pieces the service builds once and shares (the socket guard, publishing, room addressing).
import type { Logger } from '../../infra/logger.js';
import type { Bus } from '../../realtime/index.js';
import type { ChatConnection, ChatHub, ChatIdentity } from '../hub.js';
import type { RoomLive } from '../live.js';
import type { ChatNotifier } from '../notify.js';
import type { ChatBusEvent } from '../protocol.js';
import type { ChatScope } from '../reads.js';
import type { ChatRepository } from '../repository.js';
import type { RoomsRepository } from '../rooms.js';
import type { MessageThrottle, TypingThrottle } from '../throttle.js';
import type { HistoryCache } from './history-cache.js';
import type { SocketGuard } from './socket-guard.js';

export type SendStage = 'queued' | 'checks' | 'store';

export interface ChatServiceDeps {
  hub: ChatHub;
  repo: ChatRepository;
  bus: Bus;
  throttle: MessageThrottle;
  typing: TypingThrottle;
  logger: Logger;
  /**
   * Re-checks the socket's session against the per-user revocation marker (the database when the store is
   * down); false once it is revoked, banned or expired, after the socket has been closed. Runs before every
   * write, so a revocation whose bus message never arrived still stops the user at the first write.
   */
  sessionLive: (conn: ChatConnection, id: ChatIdentity) => Promise<boolean>;
  /** Inbound frames of any type one socket may send per ChatLimits.FRAME_WINDOW_MS. */
  frameLimit: number;
  /** The history sent on connect; every received event except typing invalidates it. */
  history: HistoryCache;
  /** Where the stages of a send go (seconds): how long it waited its turn, the checks, the insert. */
  onSendStage?: (stage: SendStage, seconds: number) => void;
  /** Rooms (§6.1); without them only `general` exists (unit tests of the §6 rules). */
  live?: RoomLive;
  rooms?: RoomsRepository;
  notifier?: ChatNotifier;
  /** A `presence_changed` arrived for a room. */
  onRoomPresence?: (roomId: string) => void;
  /**
   * Read replicas (chat/reads.ts): every stored change records its position here before it is published, so the
   * author's next read (and anyone's history read after the frame) on any instance sees it. Absent: no replicas.
   */
  changed?: (scope: ChatScope) => Promise<void>;
}

/** The service's dependencies with what it built from them, as the frame handlers use them. */
export interface ServiceContext {
  deps: ChatServiceDeps;
  guard: SocketGuard;
  /** Sends a chat event to every instance (on its room's topic). */
  publish(event: ChatBusEvent): void;
  /** The room a frame addresses; a frame that names one makes the socket room-aware (§6.1 frames on general). */
  roomOf(conn: ChatConnection, roomId: string | undefined): string;
}
