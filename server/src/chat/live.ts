// Owns this instance's live state of rooms (docs/architecture.md, "Chat rooms: order and resume"): per room a
// pipe that delivers the room's changes to local subscribers exactly once and in revision order (holding early
// arrivals, filling gaps from PostgreSQL, re-checking subscribers when the room lost a member), and per socket
// its subscriptions with the resume (`subscribed` + replay before any live frame).
import type { Logger } from '../infra/logger.js';
import type { Bus } from '../realtime/index.js';
import type { ChatConnection, ChatHub } from './hub.js';
import {
  type ChatBusEvent,
  ChatLimits,
  encode,
  GENERAL_ROOM_ID,
  legacyMessage,
  type RoomChange,
  type RoomMessage,
  roomTopic,
  type ServerEvent,
} from './protocol.js';
import type { ChatRepository, ReplayEvent, RoomHead } from './repository.js';
import type { RoomKind } from './rooms.js';

/** One change of a room, from the bus or from PostgreSQL. */
interface Change {
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

interface Sub {
  /** The last revision this socket was given (or skipped: nothing at or below it is sent again). */
  rev: number;
  /** Changes held while the subscription's replay is being sent; null once live. */
  buffer: Change[] | null;
  /** §6 frames (a socket that never used rooms, on `general`). */
  legacy: boolean;
  canWrite: boolean;
}

interface Pipe {
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

const FILL_RETRY_MS = 500;
/**
 * How long a gap among bus arrivals may last before it is read from PostgreSQL: concurrent senders' messages
 * often arrive a moment out of order (their publishes race), and the missing one is usually already on its way.
 */
const GAP_WAIT_MS = 50;
const MAX_FILL_FAILURES = 5;

function changeFromReplay(e: ReplayEvent): Change {
  const c: Change = { rev: e.rev, mv: 0, kind: e.kind, seq: e.seq, messageId: e.messageId };
  if (e.message) c.message = e.message;
  return c;
}

export function createRoomLive(deps: RoomLiveDeps): RoomLive {
  const { hub, bus, repo, logger } = deps;
  const pipes = new Map<string, Pipe>();
  const bySocket = new WeakMap<ChatConnection, Map<string, Sub>>();
  const aware = new WeakSet<ChatConnection>();
  let subscriptions = 0;

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
  // `general` always has its pipe: every instance listens on its topic.
  pipes.set(GENERAL_ROOM_ID, newPipe(GENERAL_ROOM_ID, 'general'));

  /** The frame of a change in §6.1 form (null: nothing to send, e.g. a creation replayed after its deletion). */
  const v2Frame = (roomId: string, c: Change): Buffer | null => {
    if (c.v2 !== undefined) return c.v2;
    let event: ServerEvent | null = null;
    if (c.kind === 'deleted') {
      event = { type: 'message_deleted', roomId, messageId: c.messageId, seq: c.seq, rev: c.rev };
    } else if (c.message) {
      event = {
        type: c.kind === 'created' ? 'new_message' : 'message_updated',
        roomId,
        message: c.message,
        rev: c.rev,
      };
    }
    c.v2 = event ? encode(event) : null;
    return c.v2;
  };
  /** The §6 frame of a change of `general`. */
  const legacyFrame = (c: Change): Buffer | null => {
    if (c.legacy !== undefined) return c.legacy;
    let event: ServerEvent | null = null;
    if (c.kind === 'deleted') event = { type: 'message_deleted', messageId: c.messageId };
    else if (c.message) {
      event = {
        type: c.kind === 'created' ? 'new_message' : 'message_updated',
        message: legacyMessage(c.message),
      };
    }
    c.legacy = event ? encode(event) : null;
    return c.legacy;
  };
  const frameFor = (roomId: string, sub: Sub, c: Change) =>
    sub.legacy ? legacyFrame(c) : v2Frame(roomId, c);

  const sendChange = (conn: ChatConnection, roomId: string, sub: Sub, c: Change, now: boolean) => {
    if (c.rev <= sub.rev) return;
    sub.rev = c.rev;
    const frame = frameFor(roomId, sub, c);
    if (!frame) return;
    if (now) hub.sendNow(conn, frame);
    else hub.push(conn, frame);
  };

  const deliver = (pipe: Pipe, c: Change) => {
    if (pipe.roomId === GENERAL_ROOM_ID) deps.onGeneralChange();
    for (const [conn, sub] of pipe.subs) {
      if (sub.buffer) sub.buffer.push(c);
      else sendChange(conn, pipe.roomId, sub, c, false);
    }
  };

  const dropSub = (pipe: Pipe, conn: ChatConnection) => {
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
      } else {
        pipes.delete(pipe.roomId);
        pipe.leave?.();
      }
    }
    return true;
  };

  /** A private or direct room lost a member since the subscribers were checked: check them before delivering. */
  const recheckMembers = async (pipe: Pipe, version: number) => {
    const users = [...pipe.users.keys()];
    const members = await deps.membersAmong(pipe.roomId, users);
    for (const [conn, sub] of [...pipe.subs]) {
      const userId = conn.identity?.userId;
      if (!userId || members.has(userId) || conn.identity?.isAdmin) continue;
      void sub;
      dropSub(pipe, conn);
      hub.send(conn, encode({ type: 'unsubscribed', roomId: pipe.roomId, reason: 'removed' }));
    }
    pipe.membersVersion = Math.max(pipe.membersVersion, version);
  };

  /** Delivers what can be delivered in order; fills gaps from PostgreSQL. One run per pipe at a time. */
  const pump = async (pipe: Pipe): Promise<void> => {
    if (pipe.busy) return;
    pipe.busy = true;
    try {
      for (;;) {
        if (pipe.lastRev === null) return;
        const next = pipe.pending.get(pipe.lastRev + 1);
        if (next) {
          if (
            next.mv > pipe.membersVersion &&
            (pipe.kind === 'private' || pipe.kind === 'direct') &&
            pipe.subs.size > 0
          ) {
            await recheckMembers(pipe, next.mv);
          }
          pipe.pending.delete(next.rev);
          pipe.lastRev = next.rev;
          pipe.gapSince = 0;
          deliver(pipe, next);
          continue;
        }
        let target = pipe.want;
        for (const rev of pipe.pending.keys()) target = Math.max(target, rev);
        if (target <= pipe.lastRev) {
          pipe.pending.clear();
          pipe.gapSince = 0;
          return;
        }
        if (pipe.want <= pipe.lastRev) {
          // Only bus arrivals say there is a gap: give the missing ones a moment before reading them.
          const now = Date.now();
          if (pipe.gapSince === 0) {
            pipe.gapSince = now;
            setTimeout(() => kick(pipe), GAP_WAIT_MS).unref();
            return;
          }
          if (now - pipe.gapSince < GAP_WAIT_MS) return;
        }
        pipe.gapSince = 0;
        // A gap: the changes exist in PostgreSQL (a change is published after its commit, and a later one
        // commits after it under the room's lock); read them instead of waiting for a bus message that may
        // never come.
        try {
          const changes = await repo.changes(pipe.roomId, pipe.lastRev, target, ChatLimits.MAX_REPLAY);
          pipe.failures = 0;
          for (const e of changes) if (!pipe.pending.has(e.rev)) pipe.pending.set(e.rev, changeFromReplay(e));
          if (!pipe.pending.has(pipe.lastRev + 1)) {
            // Not there (a race with a purge's renumbering is impossible; a foreign writer is not): skip on.
            const first = Math.min(...pipe.pending.keys(), target + 1);
            pipe.lastRev = first - 1;
          }
        } catch (err) {
          pipe.failures++;
          logger.warn({ err, roomId: pipe.roomId }, 'chat: filling a gap failed');
          if (pipe.failures >= MAX_FILL_FAILURES) {
            // PostgreSQL stays away: deliver what is here; clients see the seq gap and resume on their own.
            const first = Math.min(...pipe.pending.keys(), target + 1);
            pipe.lastRev = first - 1;
            pipe.failures = 0;
            continue;
          }
          setTimeout(() => void pump(pipe), FILL_RETRY_MS).unref();
          return;
        }
      }
    } finally {
      pipe.busy = false;
    }
  };
  const kick = (pipe: Pipe) => {
    pump(pipe).catch((err: unknown) => logger.error({ err, roomId: pipe.roomId }, 'chat: room pipe failed'));
  };

  const ensurePipe = async (roomId: string, kind: RoomKind): Promise<Pipe> => {
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
  };

  const register = (pipe: Pipe, conn: ChatConnection, sub: Sub) => {
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
  };

  /** Starts the pipe at the head a subscriber read, when nothing had started it yet. */
  const initPipe = (pipe: Pipe, head: RoomHead) => {
    if (pipe.lastRev === null) {
      pipe.lastRev = head.lastRev;
      pipe.membersVersion = head.membersVersion;
      for (const rev of [...pipe.pending.keys()]) if (rev <= head.lastRev) pipe.pending.delete(rev);
    }
    if (head.lastRev > pipe.want) pipe.want = head.lastRev;
    kick(pipe);
  };

  /**
   * Ends the replay phase of a subscription: whatever the pipe delivered meanwhile, in order, each once; a
   * revision missing between the replay and the first held change (the pipe had delivered it just before this
   * socket registered) is read from PostgreSQL.
   */
  const goLive = async (conn: ChatConnection, pipe: Pipe, sub: Sub, now: boolean) => {
    for (let round = 0; round < 3; round++) {
      const held = sub.buffer ?? [];
      sub.buffer = [];
      held.sort((x, y) => x.rev - y.rev);
      const first = held[0];
      const upTo = first ? first.rev - 1 : (pipe.lastRev ?? sub.rev);
      if (upTo > sub.rev) {
        const missing = await repo.changes(pipe.roomId, sub.rev, upTo, ChatLimits.MAX_REPLAY);
        for (const e of missing) sendChange(conn, pipe.roomId, sub, changeFromReplay(e), now);
      }
      for (const c of held) sendChange(conn, pipe.roomId, sub, c, now);
      if (sub.buffer.length === 0) break;
    }
    const rest = sub.buffer ?? [];
    sub.buffer = null;
    for (const c of rest) sendChange(conn, pipe.roomId, sub, c, now);
  };

  const live: RoomLive = {
    async subscribe(conn, roomId, options) {
      aware.add(conn);
      const pipe = await ensurePipe(roomId, options.kind);
      if (conn.ws.readyState !== conn.ws.OPEN) {
        if (pipe.subs.size === 0 && roomId !== GENERAL_ROOM_ID) {
          pipes.delete(roomId);
          pipe.leave?.();
        }
        return;
      }
      const sub: Sub = { rev: 0, buffer: [], legacy: false, canWrite: options.canWrite };
      register(pipe, conn, sub);
      try {
        const head = await repo.head(roomId);
        if (!head) {
          dropSub(pipe, conn);
          return;
        }
        initPipe(pipe, head);
        let since = head.lastRev;
        let resync = false;
        if (options.sinceRev !== undefined) since = options.sinceRev;
        else if (options.sinceSeq !== undefined) {
          since =
            options.sinceSeq > head.lastSeq
              ? head.lastRev + 1
              : await repo.revAtSeq(roomId, options.sinceSeq);
        }
        let replay: ReplayEvent[] = [];
        if (since > head.lastRev) resync = true;
        else if (since < head.lastRev) {
          replay = await repo.changes(roomId, since, head.lastRev, ChatLimits.MAX_REPLAY + 1);
          if (replay.length > ChatLimits.MAX_REPLAY) {
            resync = true;
            replay = [];
          }
        }
        const frames: Buffer[] = [];
        for (const e of replay) {
          const frame = v2Frame(roomId, changeFromReplay(e));
          if (frame) frames.push(frame);
        }
        hub.send(
          conn,
          encode({
            type: 'subscribed',
            roomId,
            lastSeq: head.lastSeq,
            rev: head.lastRev,
            replayed: frames.length,
            resync,
          }),
        );
        for (const frame of frames) hub.send(conn, frame);
        sub.rev = head.lastRev;
        await goLive(conn, pipe, sub, false);
        const presence = await deps.presence?.snapshot(roomId).catch(() => null);
        if (presence && pipe.subs.get(conn) === sub) hub.send(conn, presence);
      } catch (err) {
        dropSub(pipe, conn);
        throw err;
      }
    },

    async attachGeneral(conn, legacy) {
      if (!legacy) aware.add(conn);
      const pipe = pipes.get(GENERAL_ROOM_ID) as Pipe;
      const sub: Sub = { rev: 0, buffer: [], legacy, canWrite: conn.identity !== null };
      register(pipe, conn, sub);
      let snapshot: Awaited<ReturnType<RoomLiveDeps['generalSnapshot']>>;
      try {
        snapshot = await deps.generalSnapshot();
      } catch (err) {
        // No history: the socket still goes live (from whatever arrives next) instead of holding frames forever.
        const held = sub.buffer ?? [];
        sub.buffer = null;
        sub.rev = held[0] ? held[0].rev - 1 : (pipe.lastRev ?? 0);
        for (const c of held) sendChange(conn, GENERAL_ROOM_ID, sub, c, true);
        throw err;
      }
      initPipe(pipe, snapshot.head);
      const { messages, head } = snapshot;
      hub.sendNow(
        conn,
        encode(
          legacy
            ? { type: 'message_history', messages: messages.map(legacyMessage) }
            : {
                type: 'message_history',
                roomId: GENERAL_ROOM_ID,
                messages,
                lastSeq: head.lastSeq,
                rev: head.lastRev,
              },
        ),
      );
      sub.rev = head.lastRev;
      await goLive(conn, pipe, sub, true);
    },

    unsubscribe(conn, roomId, reason) {
      const pipe = pipes.get(roomId);
      if (!pipe || !dropSub(pipe, conn)) return false;
      hub.send(conn, encode({ type: 'unsubscribed', roomId, reason }));
      return true;
    },

    detach(conn) {
      const mine = bySocket.get(conn);
      if (!mine) return;
      for (const roomId of [...mine.keys()]) {
        const pipe = pipes.get(roomId);
        if (pipe) dropSub(pipe, conn);
      }
      bySocket.delete(conn);
    },

    subscription: (conn, roomId) => bySocket.get(conn)?.get(roomId),
    count: (conn) => bySocket.get(conn)?.size ?? 0,

    upgrade(conn) {
      if (aware.has(conn)) return;
      aware.add(conn);
      const sub = bySocket.get(conn)?.get(GENERAL_ROOM_ID);
      if (sub) sub.legacy = false;
    },
    isLegacy: (conn) => !aware.has(conn),

    change(event) {
      const pipe = pipes.get(event.roomId);
      if (!pipe) return;
      if (event.type === 'sync') {
        if (event.rev > pipe.want) pipe.want = event.rev;
        kick(pipe);
        return;
      }
      if (pipe.lastRev === null) {
        // Not started yet (its first subscriber is reading the head): hold it, unless nobody will ever read it.
        if (pipe.subs.size === 0) return;
      } else if (event.rev <= pipe.lastRev) return;
      const c: Change =
        event.type === 'message_deleted'
          ? { rev: event.rev, mv: event.mv, kind: 'deleted', seq: event.seq, messageId: event.messageId }
          : {
              rev: event.rev,
              mv: event.mv,
              kind: event.type === 'new_message' ? 'created' : 'updated',
              seq: event.message.seq,
              messageId: event.message.id,
              message: event.message,
            };
      pipe.pending.set(c.rev, c);
      kick(pipe);
    },

    toRoom(roomId, data, filter) {
      const pipe = pipes.get(roomId);
      if (!pipe) return;
      for (const conn of pipe.subs.keys()) if (!filter || filter(conn)) hub.push(conn, data);
    },

    removeUser(roomId, userId) {
      const pipe = pipes.get(roomId);
      if (!pipe) return;
      for (const conn of [...pipe.subs.keys()]) {
        if (conn.identity?.userId !== userId) continue;
        dropSub(pipe, conn);
        hub.send(conn, encode({ type: 'unsubscribed', roomId, reason: 'removed' }));
      }
    },

    localUsers: (roomId) => [...(pipes.get(roomId)?.users.keys() ?? [])],
    rooms: () => [...pipes.keys()],

    catchUp() {
      for (const pipe of pipes.values()) {
        if (pipe.lastRev === null) continue;
        repo
          .head(pipe.roomId)
          .then((head) => {
            if (!head) return;
            if (head.lastRev > pipe.want) pipe.want = head.lastRev;
            kick(pipe);
          })
          .catch((err: unknown) => logger.warn({ err, roomId: pipe.roomId }, 'chat: catch-up failed'));
      }
    },

    stats: () => ({ rooms: pipes.size, subscriptions }),
  };
  return live;
}
