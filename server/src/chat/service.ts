// Owns what happens to each client frame: validation, the member/owner/admin rules, throttling, storage and the
// bus events that carry the result to every instance. Also keeps the per-instance cache of the history sent on
// connect, so a reconnect storm costs one query instead of one per socket.
import { performance } from 'node:perf_hooks';
import type { RawData } from 'ws';
import { isDatabaseUnavailable } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import { SpanKind, withSpan } from '../infra/tracing.js';
import type { Bus, UserDisconnect } from '../realtime/index.js';
import type { ChatConnection, ChatHub, ChatIdentity } from './hub.js';
import type { RoomLive } from './live.js';
import type { ChatNotifier } from './notify.js';
import {
  type ChatBusEvent,
  ChatBusEventSchema,
  ChatErrorCode,
  ChatLimits,
  type ClientMessage,
  CloseCode,
  encode,
  GENERAL_ROOM_ID,
  legacyMessage,
  normalizeMessageText,
  parseClientFrame,
  type RoomMessage,
  roomTopic,
} from './protocol.js';
import type { ChatScope } from './reads.js';
import type { ChatRepository, RoomHead, Stored } from './repository.js';
import type { RoomKind, RoomsRepository } from './rooms.js';
import type { MessageThrottle, ThrottleResult, TypingThrottle } from './throttle.js';

export interface GeneralSnapshot {
  messages: RoomMessage[];
  /** The room's head the snapshot reflects: live frames continue from its revision. */
  head: RoomHead;
}

export interface HistoryCache {
  /** The newest messages of `general` with the head they reflect. */
  get(): Promise<GeneralSnapshot>;
  /** Called for every change of `general`. */
  invalidate(): void;
}

export function createHistoryCache(repo: ChatRepository, ttlMs: number): HistoryCache {
  let generation = 0;
  let entry: { generation: number; at: number; promise: Promise<GeneralSnapshot> } | undefined;
  return {
    get() {
      const now = Date.now();
      // The TTL bounds staleness when this instance missed bus events (degraded mode); a stale snapshot costs
      // the new socket a catch-up read, never a missed message (live.ts goLive).
      if (entry && entry.generation === generation && now - entry.at < ttlMs) return entry.promise;
      const promise = repo.recentWithHead(ChatLimits.HISTORY_ON_CONNECT);
      const current = { generation, at: now, promise };
      entry = current;
      promise.catch(() => {
        if (entry === current) entry = undefined;
      });
      return promise;
    },
    invalidate() {
      generation++;
    },
  };
}

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

export type SendStage = 'queued' | 'checks' | 'store';

export interface ChatService {
  /** Starts the service's per-socket state (abuse and frame windows count from here). */
  open(conn: ChatConnection): void;
  onFrame(conn: ChatConnection, data: RawData, isBinary: boolean): void;
  /** Resolves once the socket's queued requests have run (tests, diagnostics). */
  idle(conn: ChatConnection): Promise<void>;
  /** Sends a chat event to every instance; `listen` delivers it (and other instances' events) to local sockets. */
  publish(event: ChatBusEvent): void;
  /** A chat event from the bus (any topic of chat, any instance); validated here. */
  receive(payload: unknown): void;
  /** Subscribes the receive path to the bus; returns the unsubscribe function. */
  listen(): () => void;
  /**
   * The user-disconnect policy: closes the user's sockets (one session's only, for a one-device sign-out) and
   * tells peers about user-wide disconnections.
   */
  disconnectUser(event: UserDisconnect): void;
  /** Sends an `error` and counts it towards the abuse limit. */
  fail(conn: ChatConnection, code: ChatErrorCode, message: string): void;
}

function frameText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

/** What the service keeps per socket: the abuse and frame windows and the ordered request chain. */
interface SocketState {
  errorCount: number;
  errorWindowStart: number;
  /** Inbound frames (any type) in the current frame window; see ChatLimits.FRAME_WINDOW_MS. */
  frameCount: number;
  frameWindowStart: number;
  /** Requests waiting for the database or store, processed one after another (per-socket ordering). */
  pending: number;
  chain: Promise<void>;
  /**
   * Closed as abusive (4029). Frames the peer had already sent keep arriving after the close (5,000 in one write
   * arrive as 5,000 'message' events): they are dropped without a word, so the close costs one log line.
   */
  abusive: boolean;
}

export function createChatService(deps: ChatServiceDeps): ChatService {
  const { hub, repo, bus, throttle, typing, logger, sessionLive, history } = deps;
  // Owned here alone; entries go with their sockets (weak keys).
  const sockets = new WeakMap<ChatConnection, SocketState>();
  const newState = (): SocketState => {
    const now = Date.now();
    return {
      errorCount: 0,
      errorWindowStart: now,
      frameCount: 0,
      frameWindowStart: now,
      pending: 0,
      chain: Promise.resolve(),
      abusive: false,
    };
  };
  const stateOf = (conn: ChatConnection): SocketState => {
    let st = sockets.get(conn);
    if (!st) {
      st = newState();
      sockets.set(conn, st);
    }
    return st;
  };

  /** A chat event from any instance (this one included), validated: another instance or the store could send anything. */
  const receive = (payload: unknown) => {
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
  /** Without the rooms layer (unit tests): §6 frames to every socket. */
  const legacyBroadcast = (
    event: Extract<ChatBusEvent, { rev: number }> | Extract<ChatBusEvent, { type: 'sync' }>,
  ) => {
    if (event.type === 'sync') return;
    if (event.type === 'message_deleted')
      hub.broadcast(encode({ type: 'message_deleted', messageId: event.messageId }));
    else hub.broadcast(encode({ type: event.type, message: legacyMessage(event.message) }));
  };

  const countAbuse = (conn: ChatConnection) => {
    const now = Date.now();
    const st = stateOf(conn);
    if (now - st.errorWindowStart > ChatLimits.ABUSE_WINDOW_MS) {
      st.errorWindowStart = now;
      st.errorCount = 0;
    }
    st.errorCount++;
    if (st.errorCount > ChatLimits.ABUSE_MAX_ERRORS) {
      if (st.abusive) return true;
      st.abusive = true;
      logger.warn({ connectionId: conn.id, ip: conn.ip }, 'chat: closing abusive socket');
      hub.close(conn, CloseCode.ABUSE, 'too many invalid frames');
      return true;
    }
    return false;
  };

  const fail = (conn: ChatConnection, code: ChatErrorCode, message: string) => {
    if (countAbuse(conn)) return;
    hub.send(conn, encode({ type: 'error', code, message }));
  };

  /** The error for an edit or delete the repository refused (not the caller's message, or no such message). */
  const refuseMutation = (
    conn: ChatConnection,
    reason: 'not_found' | 'forbidden',
    verb: 'edit' | 'delete',
  ) =>
    reason === 'forbidden'
      ? fail(conn, ChatErrorCode.FORBIDDEN, `Only the author or an administrator can ${verb} this message`)
      : fail(conn, ChatErrorCode.MESSAGE_NOT_FOUND, 'Message not found');
  const internal = (conn: ChatConnection, err: unknown, what: string) => {
    if (isDatabaseUnavailable(err)) {
      // Expected during a failover or killed connections: one warn line, and a code that says "retry" (a
      // repeated clientMessageId is not stored twice). The socket stays open.
      logger.warn(
        { err: (err as Error).message, connectionId: conn.id },
        `chat: ${what}: database unavailable`,
      );
      hub.send(
        conn,
        encode({
          type: 'error',
          code: ChatErrorCode.UNAVAILABLE,
          message: `Could not ${what}; retry shortly`,
        }),
      );
      return;
    }
    logger.error({ err, connectionId: conn.id }, `chat: ${what} failed`);
    hub.send(
      conn,
      encode({ type: 'error', code: ChatErrorCode.INTERNAL_ERROR, message: `Could not ${what}` }),
    );
  };

  const { live, rooms, notifier } = deps;
  const changed = deps.changed;
  const publish = (event: ChatBusEvent) => {
    const roomId = 'roomId' in event ? event.roomId : GENERAL_ROOM_ID;
    bus
      .publish(roomTopic(roomId), event)
      .catch((err: unknown) => logger.error({ err }, 'chat: publish failed'));
  };
  /** The room a frame addresses; a frame that names one makes the socket room-aware (§6.1 frames on general). */
  const roomOf = (conn: ChatConnection, roomId: string | undefined): string => {
    if (roomId === undefined) return GENERAL_ROOM_ID;
    live?.upgrade(conn);
    return roomId;
  };
  /** The frame of a stored change for one socket: §6 form on general for a socket that never used rooms. */
  const changeFrame = (
    conn: ChatConnection,
    type: 'new_message' | 'message_updated',
    stored: Stored,
  ): Buffer => {
    const { message } = stored;
    if (message.roomId === GENERAL_ROOM_ID && (!live || live.isLegacy(conn))) {
      return encode({ type, message: legacyMessage(message) });
    }
    return encode({ type, roomId: message.roomId, message, rev: stored.rev });
  };
  const roomNotFound = (conn: ChatConnection, roomId: string) => {
    if (countAbuse(conn)) return;
    hub.send(
      conn,
      encode({ type: 'error', code: ChatErrorCode.NOT_FOUND, message: 'Room not found', roomId }),
    );
  };
  /** Edit/delete in a room other than general: a room the caller cannot see answers NOT_FOUND, as a missing one. */
  const canSee = async (conn: ChatConnection, id: ChatIdentity, roomId: string) => {
    if (roomId === GENERAL_ROOM_ID || !rooms) return true;
    const access = await rooms.access(roomId, { userId: id.userId, isAdmin: id.isAdmin });
    if (access && (access.canWrite || id.isAdmin)) return true;
    roomNotFound(conn, roomId);
    return false;
  };

  /** The identity allowed to write, or null after telling the client why not. */
  const writer = (conn: ChatConnection): ChatIdentity | null => {
    // A socket being closed (ban, sign-out, abuse) may still have requests queued behind a slow one: none of
    // them may be stored or broadcast after the close began.
    if (conn.ws.readyState !== conn.ws.OPEN) return null;
    const id = conn.identity;
    if (!id) {
      fail(conn, ChatErrorCode.UNAUTHORIZED, 'Guests are read-only: sign in to take part');
      return null;
    }
    // The session was resolved at connect time; its expiry is known and cheap to enforce here, revocation is
    // re-checked by `sessionLive` before anything is stored or broadcast.
    if (id.sessionExpiresAt <= Date.now()) {
      hub.send(
        conn,
        encode({ type: 'error', code: ChatErrorCode.SESSION_EXPIRED, message: 'Session expired' }),
      );
      hub.close(conn, CloseCode.SESSION_ENDED, 'session expired');
      return null;
    }
    if (!id.emailVerified) {
      fail(conn, ChatErrorCode.EMAIL_NOT_VERIFIED, 'Verify your email address to take part');
      return null;
    }
    return id;
  };

  /** True (after telling the client) when the throttle refused this write. */
  const throttled = (conn: ChatConnection, result: ThrottleResult): boolean => {
    if (result.ok) return false;
    if (!countAbuse(conn)) {
      hub.send(
        conn,
        encode({
          type: 'throttled',
          retryAfterMs: result.retryAfterMs,
          limit: throttle.limit,
          windowMs: throttle.windowMs,
        }),
      );
    }
    return true;
  };

  /** Shared prelude of send and edit: a permitted writer, valid text, not throttled; otherwise answered and null. */
  const writableText = async (conn: ChatConnection, raw: string) => {
    const id = writer(conn);
    if (!id) return null;
    const text = normalizeMessageText(raw, id.isAdmin);
    if (!text.ok) {
      fail(conn, text.code, text.message);
      return null;
    }
    // Both are store round trips and neither depends on the other: issued in the same tick they leave in one
    // pipeline, one round trip instead of two on every send's critical path (under CPU contention each wait for
    // a reply costs a scheduling delay, the bulk of a send's latency). A write refused for its session still
    // counts towards the throttle: its socket is being closed, and the window ends on its own.
    const [live, hit] = await Promise.all([sessionLive(conn, id), throttle.hit(id.userId)]);
    if (!live || throttled(conn, hit)) return null;
    return { id, text: text.text };
  };

  // Stage timing for send_message only: it is the path the chat latency target is about.
  const stage = deps.onSendStage;
  const since = (from: number, name: SendStage): number => {
    const now = performance.now();
    stage?.(name, (now - from) / 1000);
    return now;
  };

  const handlers = {
    async send_message(
      conn: ChatConnection,
      msg: Extract<ClientMessage, { type: 'send_message' }>,
      receivedAt: number,
    ) {
      let t = since(receivedAt, 'queued');
      const w = await writableText(conn, msg.message);
      if (!w) return;
      t = since(t, 'checks');
      const { id, text } = w;
      const roomId = roomOf(conn, msg.roomId);
      try {
        const result = await repo.insert({
          roomId,
          userId: id.userId,
          userName: id.name,
          userAvatar: id.image,
          message: text,
          clientMessageId: msg.clientMessageId,
        });
        if (result.ok === false) {
          since(t, 'store');
          return roomNotFound(conn, roomId);
        }
        const { message, rev, mv } = result;
        // With replicas, part of storing: the frame below must not reach anyone before a history read can show it.
        if (result.created && changed) await changed({ users: [id.userId], rooms: [message.roomId] });
        since(t, 'store');
        // A retried clientMessageId gets its stored message back, to the sender only.
        if (!result.created) return hub.send(conn, changeFrame(conn, 'new_message', result));
        publish({ type: 'new_message', roomId: message.roomId, rev, mv, message });
        // A sender not following the room still learns that (and how) its message was stored.
        if (live && !live.subscription(conn, message.roomId))
          hub.send(conn, changeFrame(conn, 'new_message', result));
        const kind = result.roomKind as RoomKind | undefined;
        if (notifier && kind && (kind === 'direct' || message.message.includes('@'))) {
          void notifier.onMessage(kind, message);
        }
      } catch (err) {
        internal(conn, err, 'store the message');
      }
    },

    async edit_message(conn: ChatConnection, msg: Extract<ClientMessage, { type: 'edit_message' }>) {
      const w = await writableText(conn, msg.message);
      if (!w) return;
      const { id, text } = w;
      const roomId = roomOf(conn, msg.roomId);
      try {
        if (!(await canSee(conn, id, roomId))) return;
        const result = await repo.update(
          msg.messageId,
          text,
          { userId: id.userId, isAdmin: id.isAdmin },
          roomId,
        );
        if (result.ok) {
          const { message, rev, mv } = result.value;
          if (changed) await changed({ users: [id.userId], rooms: [roomId] });
          return publish({ type: 'message_updated', roomId, rev, mv, message });
        }
        return refuseMutation(conn, result.reason, 'edit');
      } catch (err) {
        internal(conn, err, 'edit the message');
      }
    },

    async delete_message(conn: ChatConnection, msg: Extract<ClientMessage, { type: 'delete_message' }>) {
      const id = writer(conn);
      if (!id) return;
      if (!(await sessionLive(conn, id))) return;
      const roomId = roomOf(conn, msg.roomId);
      try {
        if (!(await canSee(conn, id, roomId))) return;
        const result = await repo.remove(msg.messageId, { userId: id.userId, isAdmin: id.isAdmin }, roomId);
        if (result.ok) {
          const { message, rev, mv } = result.value;
          if (changed) await changed({ users: [id.userId], rooms: [roomId] });
          return publish({
            type: 'message_deleted',
            roomId,
            rev,
            mv,
            messageId: message.id,
            seq: message.seq,
          });
        }
        return refuseMutation(conn, result.reason, 'delete');
      } catch (err) {
        internal(conn, err, 'delete the message');
      }
    },

    async subscribe(conn: ChatConnection, msg: Extract<ClientMessage, { type: 'subscribe' }>) {
      if (!live || !rooms) return fail(conn, ChatErrorCode.UNKNOWN_TYPE, 'Rooms are not available');
      live.upgrade(conn);
      const { roomId } = msg;
      if (!live.subscription(conn, roomId) && live.count(conn) >= ChatLimits.MAX_SUBSCRIPTIONS) {
        return fail(
          conn,
          ChatErrorCode.TOO_MANY_SUBSCRIPTIONS,
          `A socket can follow at most ${ChatLimits.MAX_SUBSCRIPTIONS} rooms`,
        );
      }
      const id = conn.identity;
      let kind: RoomKind = 'general';
      let canWrite = id !== null;
      if (roomId !== GENERAL_ROOM_ID) {
        // Guests read general only.
        if (!id) return roomNotFound(conn, roomId);
        if (!(await sessionLive(conn, id))) return;
        const access = await rooms.access(roomId, { userId: id.userId, isAdmin: id.isAdmin });
        if (!access) return roomNotFound(conn, roomId);
        kind = access.kind;
        canWrite = access.canWrite;
      }
      if (conn.ws.readyState !== conn.ws.OPEN) return;
      try {
        await live.subscribe(conn, roomId, {
          sinceSeq: msg.sinceSeq,
          sinceRev: msg.sinceRev,
          kind,
          canWrite,
        });
      } catch (err) {
        internal(conn, err, 'subscribe to the room');
      }
    },

    async mark_read(conn: ChatConnection, msg: Extract<ClientMessage, { type: 'mark_read' }>) {
      if (!rooms) return fail(conn, ChatErrorCode.UNKNOWN_TYPE, 'Rooms are not available');
      live?.upgrade(conn);
      const id = conn.identity;
      if (!id) return fail(conn, ChatErrorCode.UNAUTHORIZED, 'Guests have no read position: sign in');
      if (!(await sessionLive(conn, id))) return;
      try {
        const result = await rooms.markRead(msg.roomId, { userId: id.userId, isAdmin: id.isAdmin }, msg.seq);
        if ('error' in result) return roomNotFound(conn, msg.roomId);
        if (!result.changed) return;
        // The reader's room list shows it (unread counts); the room's history does not change.
        if (changed) await changed({ users: [id.userId] });
        publish({
          type: 'read',
          roomId: msg.roomId,
          userId: id.userId,
          seq: result.lastReadSeq,
          toAll: result.kind === 'direct' || result.kind === 'private',
        });
      } catch (err) {
        internal(conn, err, 'store the read position');
      }
    },
  };

  const enqueue = (conn: ChatConnection, run: () => Promise<void>) => {
    const st = stateOf(conn);
    if (st.pending >= ChatLimits.MAX_PENDING_REQUESTS) {
      fail(conn, ChatErrorCode.TOO_MANY_REQUESTS, 'Too many requests in flight');
      return;
    }
    st.pending++;
    st.chain = st.chain
      .then(run)
      .catch((err: unknown) => logger.error({ err, connectionId: conn.id }, 'chat: request failed'))
      .finally(() => {
        st.pending--;
      });
  };

  /**
   * The per-socket frame budget, spent by every frame before it is even parsed: pings, typing and invalid frames
   * are answered or dropped cheaply, but each still costs a parse and often a reply, so none is free. Beyond it
   * the socket is told `throttled`, and those replies count towards the abuse close (4029).
   */
  const overFrameBudget = (conn: ChatConnection): boolean => {
    const now = Date.now();
    const st = stateOf(conn);
    if (now - st.frameWindowStart >= ChatLimits.FRAME_WINDOW_MS) {
      st.frameWindowStart = now;
      st.frameCount = 0;
    }
    st.frameCount++;
    if (st.frameCount <= deps.frameLimit) return false;
    if (!countAbuse(conn)) {
      hub.send(
        conn,
        encode({
          type: 'throttled',
          retryAfterMs: Math.max(1, st.frameWindowStart + ChatLimits.FRAME_WINDOW_MS - now),
          limit: deps.frameLimit,
          windowMs: ChatLimits.FRAME_WINDOW_MS,
        }),
      );
    }
    return true;
  };

  return {
    fail,
    publish,
    receive,
    open(conn) {
      sockets.set(conn, newState());
    },
    idle: (conn) => stateOf(conn).chain,
    listen: () => bus.subscribe(roomTopic(GENERAL_ROOM_ID), receive),
    disconnectUser(event) {
      const code = event.reason === 'banned' ? CloseCode.POLICY : CloseCode.SESSION_ENDED;
      const accountChanged = event.reason === 'account_changed';
      const text =
        event.reason === 'banned' ? 'banned' : accountChanged ? 'account changed' : 'session ended';
      for (const conn of hub.ofUser(event.userId)) {
        // A sign-out of one device closes only that session's sockets.
        if (event.sessionId && conn.identity?.sessionId !== event.sessionId) continue;
        hub.close(conn, code, text);
      }
      typing.forget(event.userId);
      // Peers learn about user-wide disconnections only; after a one-device sign-out the user may still be here,
      // and after an account change the user reconnects at once with the new identity.
      if (!event.sessionId && !accountChanged) {
        hub.broadcast(encode({ type: 'user_disconnected', userId: event.userId }));
      }
    },
    onFrame(conn, data, isBinary) {
      // Already closed as abusive, or closing for any reason: what the peer still sends is not read.
      if (stateOf(conn).abusive || conn.ws.readyState !== conn.ws.OPEN) return;
      if (overFrameBudget(conn)) return;
      if (isBinary)
        return fail(conn, ChatErrorCode.BINARY_NOT_SUPPORTED, 'Only text frames of JSON are accepted');
      const parsed = parseClientFrame(frameText(data));
      if (!parsed.ok) return fail(conn, parsed.code, parsed.message);
      const msg = parsed.message;
      switch (msg.type) {
        case 'ping':
          hub.send(conn, encode({ type: 'pong', timestamp: new Date().toISOString() }));
          return;
        case 'typing': {
          const roomId = roomOf(conn, msg.roomId);
          const id = writer(conn);
          if (!id) return;
          if (roomId !== GENERAL_ROOM_ID && !live?.subscription(conn, roomId)?.canWrite) {
            return roomNotFound(conn, roomId);
          }
          // general keeps the §6 key (forgotten when the user leaves); a room's key is per user and room.
          const typingKey = roomId === GENERAL_ROOM_ID ? id.userId : `${id.userId}:${roomId}`;
          if (!typing.allow(typingKey, msg.isTyping)) return;
          const typingEvent: ChatBusEvent = {
            type: 'typing',
            roomId,
            userId: id.userId,
            userName: id.name,
            isTyping: msg.isTyping,
            exceptConnectionId: conn.id,
          };
          sessionLive(conn, id)
            .then((live) => {
              if (live && conn.ws.readyState === conn.ws.OPEN) publish(typingEvent);
            })
            .catch((err: unknown) => logger.error({ err }, 'chat: session check failed'));
          return;
        }
        case 'send_message': {
          const receivedAt = performance.now();
          // A span per send (no HTTP request carries it): the store and database calls are its children.
          return enqueue(conn, () =>
            withSpan(
              'chat.send_message',
              { 'herald.chat.connection_id': String(conn.id) },
              () => handlers.send_message(conn, msg, receivedAt),
              SpanKind.SERVER,
            ),
          );
        }
        case 'edit_message':
          return enqueue(conn, () => handlers.edit_message(conn, msg));
        case 'delete_message':
          return enqueue(conn, () => handlers.delete_message(conn, msg));
        case 'subscribe':
          return enqueue(conn, () => handlers.subscribe(conn, msg));
        case 'unsubscribe':
          live?.upgrade(conn);
          if (!live?.unsubscribe(conn, msg.roomId, 'requested')) {
            hub.send(conn, encode({ type: 'unsubscribed', roomId: msg.roomId, reason: 'requested' }));
          }
          return;
        case 'mark_read':
          return enqueue(conn, () => handlers.mark_read(conn, msg));
      }
    },
  };
}
