// Owns the chat wire protocol (docs/chat-protocol.md): one Zod schema per client message type, the server events, the
// ChatMessage shape, error codes, close codes and the bus payload that carries events between instances.
import { z } from 'zod';
import { noNul } from '../http/schemas.js';

/** WebSocket close codes used by the chat endpoint (docs/chat-protocol.md). */
export const CloseCode = {
  /** Server going away (shutdown); clients reconnect with jitter. */
  GOING_AWAY: 1001,
  /** Policy: banned user, slow consumer. */
  POLICY: 1008,
  /** Frame larger than the limit (sent by `ws` itself when maxPayload is exceeded). */
  TOO_BIG: 1009,
  /** Session ended (sign-out, revocation, password reset, expiry). */
  SESSION_ENDED: 4001,
  /** Abuse: flooding invalid frames or requests. */
  ABUSE: 4029,
} as const;

/** Limits of the protocol; documented in docs/chat-protocol.md. */
export const ChatLimits = {
  MAX_FRAME_BYTES: 16 * 1024,
  MESSAGE_MAX_CHARS: 400,
  HISTORY_ON_CONNECT: 100,
  HISTORY_PAGE_MAX: 100,
  HISTORY_PAGE_DEFAULT: 50,
  CLIENT_MESSAGE_ID_MAX: 100,
  /** More than this many `error`/`throttled` replies within ABUSE_WINDOW_MS closes the socket with 4029. */
  ABUSE_MAX_ERRORS: 20,
  ABUSE_WINDOW_MS: 10_000,
  /** Requests of one socket waiting for the database/store; beyond this the socket is flooding. */
  MAX_PENDING_REQUESTS: 16,
  /** Window of the per-socket frame budget (CHAT_FRAME_LIMIT frames of any type, ping included). */
  FRAME_WINDOW_MS: 10_000,
  /** typing: true at most once per this interval per user (false only after a forwarded true). */
  TYPING_INTERVAL_MS: 1_000,
  /** Rooms one socket may be subscribed to at once (`general` included). */
  MAX_SUBSCRIPTIONS: 200,
  /** A resume that would replay more changes than this answers `resync: true` instead (reload history). */
  MAX_REPLAY: 1_000,
  /** unreadCount is counted up to this many messages (a bound on the work of one room list). */
  UNREAD_COUNT_CAP: 1_000,
} as const;

/** The seed's room: every member is in it, guests read it, frames without `roomId` address it. */
export const GENERAL_ROOM_ID = 'general';

export const ChatErrorCode = {
  INVALID_JSON: 'INVALID_JSON',
  BINARY_NOT_SUPPORTED: 'BINARY_NOT_SUPPORTED',
  UNKNOWN_TYPE: 'UNKNOWN_TYPE',
  VALIDATION_ERROR: 'VALIDATION_ERROR',
  UNAUTHORIZED: 'UNAUTHORIZED',
  EMAIL_NOT_VERIFIED: 'EMAIL_NOT_VERIFIED',
  FORBIDDEN: 'FORBIDDEN',
  MESSAGE_NOT_FOUND: 'MESSAGE_NOT_FOUND',
  MESSAGE_EMPTY: 'MESSAGE_EMPTY',
  MESSAGE_TOO_LONG: 'MESSAGE_TOO_LONG',
  MESSAGE_MULTILINE: 'MESSAGE_MULTILINE',
  TOO_MANY_REQUESTS: 'TOO_MANY_REQUESTS',
  SESSION_EXPIRED: 'SESSION_EXPIRED',
  INTERNAL_ERROR: 'INTERNAL_ERROR',
  /** The database was unreachable (connections lost, failover): nothing was stored; retry the same frame. */
  UNAVAILABLE: 'UNAVAILABLE',
  /** A room that does not exist, or a private/direct one the caller is not a member of (§6.1). */
  NOT_FOUND: 'NOT_FOUND',
  /** More rooms subscribed on one socket than ChatLimits.MAX_SUBSCRIPTIONS. */
  TOO_MANY_SUBSCRIPTIONS: 'TOO_MANY_SUBSCRIPTIONS',
} as const;
export type ChatErrorCode = (typeof ChatErrorCode)[keyof typeof ChatErrorCode];

// ---------------------------------------------------------------------------------------------------------
// Client → server

const messageText = z.string().max(ChatLimits.MAX_FRAME_BYTES);
/** `general` or a room id the server generated (a UUID); anything else cannot name a room. */
export const RoomIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^(general|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/, {
    message: 'must be "general" or a room id',
  });
const roomId = RoomIdSchema.optional();
const seqValue = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const NO_NUL = { message: 'must not contain NUL (U+0000) characters' };
const messageId = z.guid({ message: 'must be a message id (UUID)' });

export const PingSchema = z.strictObject({ type: z.literal('ping') });
export const SendMessageSchema = z.strictObject({
  type: z.literal('send_message'),
  roomId,
  message: messageText,
  clientMessageId: z.string().min(1).max(ChatLimits.CLIENT_MESSAGE_ID_MAX).refine(noNul, NO_NUL).optional(),
});
export const EditMessageSchema = z.strictObject({
  type: z.literal('edit_message'),
  roomId,
  messageId,
  message: messageText,
});
export const DeleteMessageSchema = z.strictObject({ type: z.literal('delete_message'), roomId, messageId });
export const TypingSchema = z.strictObject({ type: z.literal('typing'), roomId, isTyping: z.boolean() });
export const SubscribeSchema = z.strictObject({
  type: z.literal('subscribe'),
  roomId: RoomIdSchema,
  /** The last message seq the client holds: everything after it is replayed before live frames. */
  sinceSeq: seqValue.optional(),
  /** The last `rev` the client applied (exact resume, edits included); takes precedence over sinceSeq. */
  sinceRev: seqValue.optional(),
});
export const UnsubscribeSchema = z.strictObject({ type: z.literal('unsubscribe'), roomId: RoomIdSchema });
export const MarkReadSchema = z.strictObject({
  type: z.literal('mark_read'),
  roomId: RoomIdSchema,
  seq: seqValue,
});

export const ClientMessageSchemas = {
  ping: PingSchema,
  send_message: SendMessageSchema,
  edit_message: EditMessageSchema,
  delete_message: DeleteMessageSchema,
  typing: TypingSchema,
  subscribe: SubscribeSchema,
  unsubscribe: UnsubscribeSchema,
  mark_read: MarkReadSchema,
} as const;
export type ClientMessageType = keyof typeof ClientMessageSchemas;
export type ClientMessage = z.infer<(typeof ClientMessageSchemas)[ClientMessageType]>;

export type ParseResult =
  | { ok: true; message: ClientMessage }
  | { ok: false; code: ChatErrorCode; message: string };

function isClientType(type: string): type is ClientMessageType {
  return Object.hasOwn(ClientMessageSchemas, type);
}

/** Parses one text frame: JSON, then the `type`, then that type's schema. Never throws. */
export function parseClientFrame(text: string): ParseResult {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, code: ChatErrorCode.INVALID_JSON, message: 'Frame is not valid JSON' };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { ok: false, code: ChatErrorCode.VALIDATION_ERROR, message: 'Frame must be a JSON object' };
  }
  const type = (raw as { type?: unknown }).type;
  if (typeof type !== 'string') {
    return { ok: false, code: ChatErrorCode.VALIDATION_ERROR, message: 'type: a string is required' };
  }
  if (!isClientType(type)) {
    return {
      ok: false,
      code: ChatErrorCode.UNKNOWN_TYPE,
      message: `Unknown message type "${type.slice(0, 40)}"`,
    };
  }
  const parsed = ClientMessageSchemas[type].safeParse(raw);
  if (!parsed.success) {
    return {
      ok: false,
      code: ChatErrorCode.VALIDATION_ERROR,
      message: parsed.error.issues
        .map((i) => `${i.path.join('.') || 'frame'}: ${i.message}`)
        .join('; ')
        .slice(0, 500),
    };
  }
  return { ok: true, message: parsed.data };
}

// Anything that breaks a line for a reader; admins may send these, members may not.
const LINE_BREAK = /[\n\r\v\f\u0085\u2028\u2029]/;

export type TextCheck = { ok: true; text: string } | { ok: false; code: ChatErrorCode; message: string };

/** Trims and checks a chat text: 1–400 characters (code points), single line unless the author is an admin. */
export function normalizeMessageText(input: string, allowMultiline: boolean): TextCheck {
  const text = input.trim();
  if (text.length === 0) return { ok: false, code: ChatErrorCode.MESSAGE_EMPTY, message: 'Message is empty' };
  // Count code points so an emoji counts as one character, as users see it.
  let chars = 0;
  for (const _ of text) {
    chars++;
    if (chars > ChatLimits.MESSAGE_MAX_CHARS) {
      return {
        ok: false,
        code: ChatErrorCode.MESSAGE_TOO_LONG,
        message: `Message is longer than ${ChatLimits.MESSAGE_MAX_CHARS} characters`,
      };
    }
  }
  if (!noNul(text)) {
    return {
      ok: false,
      code: ChatErrorCode.VALIDATION_ERROR,
      message: `message: ${NO_NUL.message}`,
    };
  }
  if (!allowMultiline && LINE_BREAK.test(text)) {
    return { ok: false, code: ChatErrorCode.MESSAGE_MULTILINE, message: 'Message must be a single line' };
  }
  return { ok: true, text };
}

// ---------------------------------------------------------------------------------------------------------
// Server → client

export const ChatMessageSchema = z
  .object({
    id: z.string(),
    userId: z.string(),
    userName: z.string(),
    userAvatar: z.string().nullable(),
    message: z.string(),
    // Documented as date-time (ISO 8601, UTC); written by the server, so not re-validated on output.
    createdAt: z.string().meta({ format: 'date-time' }),
    editedAt: z.string().meta({ format: 'date-time' }).optional(),
    clientMessageId: z.string().optional(),
  })
  .meta({
    id: 'ChatMessage',
    example: {
      id: '0b9f6a8e-58a4-4c1e-9d5e-1f3b2c4d5e6f',
      userId: 'u_8Jd2kq',
      userName: 'Ada',
      userAvatar: null,
      message: 'Hello everyone',
      createdAt: '2026-01-01T12:00:00.000Z',
      clientMessageId: 'c-1',
    },
  });
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

/** A message as room-aware clients see it (§6.1): the §6 fields plus its room and its place in it. */
export const RoomMessageSchema = ChatMessageSchema.extend({
  roomId: z.string(),
  seq: z.number().int().min(1),
}).meta({
  id: 'RoomMessage',
  example: {
    id: '0b9f6a8e-58a4-4c1e-9d5e-1f3b2c4d5e6f',
    roomId: 'general',
    seq: 42,
    userId: 'u_8Jd2kq',
    userName: 'Ada',
    userAvatar: null,
    message: 'Hello @bob',
    createdAt: '2026-01-01T12:00:00.000Z',
  },
});
export type RoomMessage = z.infer<typeof RoomMessageSchema>;

/** The §6 shape of a room message (what a client that never says roomId sees). */
export function legacyMessage(m: RoomMessage): ChatMessage {
  const { roomId: _room, seq: _seq, ...rest } = m;
  return rest;
}

export const PresenceCountsSchema = z.object({
  guests: z.number().int().min(0),
  members: z.number().int().min(0),
  admins: z.number().int().min(0),
});

/**
 * Events that travel between instances on the bus (topic `chat.event`). Each is exactly the server → client
 * event, except `typing`, which may carry the originating connection so it is not echoed to it.
 */
const busRev = z.number().int().min(1);
/**
 * Events that travel between instances on the bus. `general` uses the topic `chat.event` (every instance listens),
 * every other room its own topic `chat.room.<id>` (only instances with a subscriber listen). Room changes carry
 * the room revision `rev` (the receiving instance delivers them in rev order, filling gaps from PostgreSQL) and
 * `mv`, the room's members version at the time (a newer one makes the instance re-check its subscribers first).
 */
export const ChatBusEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('new_message'),
    roomId: z.string(),
    rev: busRev,
    mv: z.number().int().min(0),
    message: RoomMessageSchema,
  }),
  z.object({
    type: z.literal('message_updated'),
    roomId: z.string(),
    rev: busRev,
    mv: z.number().int().min(0),
    message: RoomMessageSchema,
  }),
  z.object({
    type: z.literal('message_deleted'),
    roomId: z.string(),
    rev: busRev,
    mv: z.number().int().min(0),
    messageId: z.string(),
    seq: z.number().int().min(1),
  }),
  /** The room changed up to `rev` without one event per change (a purge): instances catch up from PostgreSQL. */
  z.object({ type: z.literal('sync'), roomId: z.string(), rev: z.number().int().min(0) }),
  z.object({ type: z.literal('messages_purged'), userId: z.string(), deletedCount: z.number().int().min(0) }),
  z.object({
    type: z.literal('typing'),
    roomId: z.string(),
    userId: z.string(),
    userName: z.string(),
    isTyping: z.boolean(),
    exceptConnectionId: z.string().optional(),
  }),
  /** `toAll`: direct and private rooms tell every member; other rooms only the reader's own sockets (devices). */
  z.object({
    type: z.literal('read'),
    roomId: z.string(),
    userId: z.string(),
    seq: z.number().int().min(0),
    toAll: z.boolean(),
  }),
  /** A member left or was removed: every instance drops that user's subscriptions of the room at once. */
  z.object({ type: z.literal('member_removed'), roomId: z.string(), userId: z.string() }),
  /** Someone's subscription of the room changed somewhere: recount `online` (debounced by the sender). */
  z.object({ type: z.literal('presence_changed'), roomId: z.string() }),
]);
export type ChatBusEvent = z.infer<typeof ChatBusEventSchema>;
export type RoomChange = Extract<ChatBusEvent, { rev: number; mv: number }>;
export const CHAT_BUS_TOPIC = 'chat.event';
/** The bus topic of one room (`general` keeps CHAT_BUS_TOPIC). */
export const roomTopic = (roomId: string) =>
  roomId === GENERAL_ROOM_ID ? CHAT_BUS_TOPIC : `chat.room.${roomId}`;

export type ServerEvent =
  | {
      type: 'connected';
      connectionId: string;
      userId: string | null;
      role: 'guest' | 'member' | 'admin';
      instanceId: string;
    }
  | { type: 'message_history'; messages: ChatMessage[]; roomId?: string; lastSeq?: number; rev?: number }
  | { type: 'new_message'; message: ChatMessage; roomId?: string; rev?: number }
  | { type: 'message_updated'; message: ChatMessage; roomId?: string; rev?: number }
  | { type: 'message_deleted'; messageId: string; roomId?: string; seq?: number; rev?: number }
  | { type: 'messages_purged'; userId: string; deletedCount: number }
  | { type: 'presence'; guests: number; members: number; admins: number; roomId?: string }
  | { type: 'presence'; roomId: string; online: number; userIds?: string[] }
  | { type: 'typing'; userId: string; userName: string; isTyping: boolean; roomId?: string }
  | { type: 'subscribed'; roomId: string; lastSeq: number; rev: number; replayed: number; resync: boolean }
  | { type: 'unsubscribed'; roomId: string; reason: 'requested' | 'removed' }
  | { type: 'read'; roomId: string; userId: string; seq: number }
  | { type: 'user_disconnected'; userId: string }
  | { type: 'throttled'; retryAfterMs: number; limit: number; windowMs: number }
  | { type: 'error'; code: ChatErrorCode; message: string; roomId?: string }
  | { type: 'pong'; timestamp: string };

/** Serialises an event once; the same bytes go to every socket (no per-socket encoding in `ws`). */
export function encode(event: ServerEvent): Buffer {
  return Buffer.from(JSON.stringify(event));
}
