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
} as const;

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
} as const;
export type ChatErrorCode = (typeof ChatErrorCode)[keyof typeof ChatErrorCode];

// ---------------------------------------------------------------------------------------------------------
// Client → server

const messageText = z.string().max(ChatLimits.MAX_FRAME_BYTES);
const NO_NUL = { message: 'must not contain NUL (U+0000) characters' };
const messageId = z.guid({ message: 'must be a message id (UUID)' });

export const PingSchema = z.strictObject({ type: z.literal('ping') });
export const SendMessageSchema = z.strictObject({
  type: z.literal('send_message'),
  message: messageText,
  clientMessageId: z.string().min(1).max(ChatLimits.CLIENT_MESSAGE_ID_MAX).refine(noNul, NO_NUL).optional(),
});
export const EditMessageSchema = z.strictObject({
  type: z.literal('edit_message'),
  messageId,
  message: messageText,
});
export const DeleteMessageSchema = z.strictObject({ type: z.literal('delete_message'), messageId });
export const TypingSchema = z.strictObject({ type: z.literal('typing'), isTyping: z.boolean() });

export const ClientMessageSchemas = {
  ping: PingSchema,
  send_message: SendMessageSchema,
  edit_message: EditMessageSchema,
  delete_message: DeleteMessageSchema,
  typing: TypingSchema,
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

export const PresenceCountsSchema = z.object({
  guests: z.number().int().min(0),
  members: z.number().int().min(0),
  admins: z.number().int().min(0),
});

/**
 * Events that travel between instances on the bus (topic `chat.event`). Each is exactly the server → client
 * event, except `typing`, which may carry the originating connection so it is not echoed to it.
 */
export const ChatBusEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('new_message'), message: ChatMessageSchema }),
  z.object({ type: z.literal('message_updated'), message: ChatMessageSchema }),
  z.object({ type: z.literal('message_deleted'), messageId: z.string() }),
  z.object({ type: z.literal('messages_purged'), userId: z.string(), deletedCount: z.number().int().min(0) }),
  z.object({
    type: z.literal('typing'),
    userId: z.string(),
    userName: z.string(),
    isTyping: z.boolean(),
    exceptConnectionId: z.string().optional(),
  }),
]);
export type ChatBusEvent = z.infer<typeof ChatBusEventSchema>;
export const CHAT_BUS_TOPIC = 'chat.event';

export type ServerEvent =
  | {
      type: 'connected';
      connectionId: string;
      userId: string | null;
      role: 'guest' | 'member' | 'admin';
      instanceId: string;
    }
  | { type: 'message_history'; messages: ChatMessage[] }
  | { type: 'new_message'; message: ChatMessage }
  | { type: 'message_updated'; message: ChatMessage }
  | { type: 'message_deleted'; messageId: string }
  | { type: 'messages_purged'; userId: string; deletedCount: number }
  | { type: 'presence'; guests: number; members: number; admins: number }
  | { type: 'typing'; userId: string; userName: string; isTyping: boolean }
  | { type: 'user_disconnected'; userId: string }
  | { type: 'throttled'; retryAfterMs: number; limit: number; windowMs: number }
  | { type: 'error'; code: ChatErrorCode; message: string }
  | { type: 'pong'; timestamp: string };

/** Serialises an event once; the same bytes go to every socket (no per-socket encoding in `ws`). */
export function encode(event: ServerEvent): Buffer {
  return Buffer.from(JSON.stringify(event));
}
