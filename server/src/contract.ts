// The wire types clients build on, derived from the schemas that validate and document the routes so a client can
// never drift from the server. Types only: nothing here exists at run time. `@herald/client` does not import this
// module: client/scripts/gen-contract.mjs expands every export into plain declarations (client/src/contract.ts, with
// the values of `ContractValues` as constants), so the published SDK is self-contained; a client test keeps that
// file equal to what this module generates.
import type { z } from 'zod';
import type { BroadcastBodySchema, BroadcastResultSchema } from './admin/broadcast.js';
import type { ApiKeySchema, CreateApiKeyBodySchema } from './api-keys/routes.js';
import type { API_KEY_SCOPES } from './api-keys/service.js';
import type {
  ChatErrorCode,
  ChatErrorCode as ChatErrorCodes,
  ChatMessageSchema,
  ClientMessage,
  CloseCode,
  PresenceCountsSchema,
  RoomMessageSchema,
  ServerEvent,
} from './chat/protocol.js';
import type { MemberSchema, RoomSchema } from './chat/rooms-routes.js';
import type { HttpErrorCode } from './http/errors.js';
import type { ErrorSchema } from './http/schemas.js';
import type { NotificationErrorCode, StreamErrorCode } from './notifications/errors.js';
import type { SSE_EVENT_NAMES, SseEventName } from './notifications/events.js';
import type {
  ActionSchema,
  CountsSchema,
  ListQuerySchema,
  MetadataSchema,
  NOTIFICATION_TYPES,
  NotificationSchema,
  NotificationTypeSchema,
  PaginationSchema,
  PreferencesPatchSchema,
  PreferencesSchema,
} from './notifications/schemas.js';
import type { MetricsSchema } from './ops/metrics.js';
import type { SubscribeBodySchema, SubscriptionSchema } from './push/schemas.js';
import type { WEBHOOK_EVENT_TYPES } from './webhooks/events.js';
import type {
  CreateWebhookBodySchema,
  DeliverySchema,
  UpdateWebhookBodySchema,
  WebhookSchema,
} from './webhooks/routes.js';

/** Error body of every non-2xx answer of Herald's own routes. */
export type ErrorBody = z.infer<typeof ErrorSchema>;

// Notifications (docs/api.md)
export type NotificationType = z.infer<typeof NotificationTypeSchema>;
export type Notification = z.infer<typeof NotificationSchema>;
export type NotificationAction = z.input<typeof ActionSchema>;
export type NotificationMetadata = z.input<typeof MetadataSchema>;
/**
 * Query of GET /notification/list as a caller writes it (every field optional, defaults on the server). `page` and
 * `limit` are coerced from the query string on the server (input `unknown`); callers pass numbers.
 */
export type ListQuery = Omit<z.input<typeof ListQuerySchema>, 'page' | 'limit'> & {
  page?: number;
  limit?: number;
};
export type Pagination = z.infer<typeof PaginationSchema>;
export interface ListResponse {
  notifications: Notification[];
  pagination: Pagination;
}
export type Counts = z.infer<typeof CountsSchema>;
export interface CountsResponse {
  counts: Counts;
}
export type Preferences = z.infer<typeof PreferencesSchema>;
/** Body of PATCH /notification/preferences. */
export type PreferencesInput = z.input<typeof PreferencesPatchSchema>;

// Web Push (docs/api.md#web-push)
/** A subscribed browser as GET/POST /notification/push/subscriptions return it. */
export type PushSubscriptionView = z.infer<typeof SubscriptionSchema>;
/** Body of POST /notification/push/subscriptions: a browser's `PushSubscription.toJSON()`. */
export type PushSubscriptionInput = z.input<typeof SubscribeBodySchema>;

// Notification stream (SSE, docs/api.md)
export type NotificationStreamEventName = SseEventName;
export type NotificationStreamErrorCode = StreamErrorCode;
/** `data` of each SSE event; `type` equals the event name. */
export type NotificationStreamEvent =
  | {
      type: 'connected';
      userId: string;
      unreadCount: number;
      timestamp: number;
      /** A `Last-Event-ID` was honoured. */
      resumed: boolean;
      /** Events replayed after this one. */
      replayed: number;
      /** An exact replay was impossible: refetch list and counts. */
      resync: boolean;
    }
  | { type: 'new_notification'; notification: Notification }
  | { type: 'notification_updated'; notification: Notification }
  | { type: 'notification_deleted'; notificationId: string }
  | { type: 'notifications_cleared'; deletedCount: number }
  | { type: 'unread_count_changed'; unreadCount: number }
  | { type: 'keep_alive'; timestamp: number }
  | { type: 'error'; code: StreamErrorCode; message: string };

// Admin (docs/api.md)
/** Body of POST /admin/notifications/send. */
export type BroadcastRequest = z.input<typeof BroadcastBodySchema>;
export type BroadcastResult = z.infer<typeof BroadcastResultSchema>;
export type MetricsReport = z.infer<typeof MetricsSchema>;

// API keys and webhooks (CONTRACT §9, docs/api.md#api-keys, #webhooks)
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];
/** An API key as every answer shows it (never the key itself). */
export type ApiKey = z.infer<typeof ApiKeySchema>;
/** Body of POST /admin/api-keys. */
export type ApiKeyCreateRequest = z.input<typeof CreateApiKeyBodySchema>;
/** Answer of POST /admin/api-keys: the key itself (`hk_…`) is shown only here. */
export type CreatedApiKey = ApiKey & { key: string };
export interface ApiKeysResponse {
  apiKeys: ApiKey[];
}
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
/** A webhook endpoint as every answer shows it (never its secret). */
export type Webhook = z.infer<typeof WebhookSchema>;
/** Body of POST /admin/webhooks. */
export type WebhookCreateRequest = z.input<typeof CreateWebhookBodySchema>;
/** Body of PATCH /admin/webhooks/:id (at least one field). */
export type WebhookUpdateRequest = z.input<typeof UpdateWebhookBodySchema>;
/** Answer of POST /admin/webhooks: the signing secret (`whsec_…`) is shown only here. */
export type CreatedWebhook = Webhook & { secret: string };
export interface WebhooksResponse {
  webhooks: Webhook[];
}
/** One queued event of a webhook with its latest attempt (GET /admin/webhooks/:id/deliveries). */
export type WebhookDelivery = z.infer<typeof DeliverySchema>;
export interface WebhookDeliveriesResponse {
  deliveries: WebhookDelivery[];
}

// Chat (docs/chat-protocol.md)
export type ChatMessage = z.infer<typeof ChatMessageSchema>;
export type PresenceCounts = z.infer<typeof PresenceCountsSchema>;
export type ChatServerEvent = ServerEvent;
export type ChatClientFrame = ClientMessage;
export type { ChatErrorCode };
/** The close codes' values, for clients that must use the same numbers without importing server code. */
export type ChatCloseCodes = typeof CloseCode;
export interface ChatHistoryResponse {
  messages: ChatMessage[];
}
export interface PurgeMessagesResponse {
  deletedCount: number;
}

// Chat rooms (§6.1, docs/chat-protocol.md "Rooms")
/** A message as room-aware clients see it: the ChatMessage fields plus `roomId` and `seq`. */
export type RoomMessage = z.infer<typeof RoomMessageSchema>;
export type ChatRoom = z.infer<typeof RoomSchema>;
export type ChatRoomKind = ChatRoom['kind'];
export type ChatRoomMember = z.infer<typeof MemberSchema>;
export interface ChatRoomResponse {
  room: ChatRoom;
}
export interface ChatRoomsResponse {
  rooms: ChatRoom[];
}
export interface ChatRoomDetailResponse {
  room: ChatRoom;
  members: ChatRoomMember[];
}
export interface ChatRoomMessagesResponse {
  messages: RoomMessage[];
  hasMore: boolean;
}
export interface ChatReadResponse {
  lastReadSeq: number;
  unreadCount: number;
}
export interface ChatMemberRemovedResponse {
  roomId: string;
  userId: string;
}

// Runtime values (the generator emits each as an `export const` of the client, with a type of the same name where
// one exists): apps use them instead of restating the lists.
export type { HttpErrorCode };
export interface ContractValues {
  /** Every notification `type`, in the contract's order. */
  NOTIFICATION_TYPES: typeof NOTIFICATION_TYPES;
  /** The `event:` names of GET /notification/stream. */
  NOTIFICATION_STREAM_EVENTS: typeof SSE_EVENT_NAMES;
  /** WebSocket close codes of the chat endpoint. */
  ChatCloseCode: typeof CloseCode;
  /** Codes of the chat socket's `error` frames. */
  ChatErrorCode: typeof ChatErrorCodes;
  /** The notification feature's own codes (the generic ones are HttpErrorCode). */
  NotificationErrorCode: typeof NotificationErrorCode;
  /** Every code the notification stream's `error` event carries (own and generic). */
  NotificationStreamErrorCode: typeof StreamErrorCode;
  /** The generic error codes of every route (CONTRACT §0). */
  HttpErrorCode: typeof HttpErrorCode;
  /** The scopes an API key can carry (CONTRACT §9). */
  API_KEY_SCOPES: typeof API_KEY_SCOPES;
  /** The event types a webhook can subscribe to (CONTRACT §9). */
  WEBHOOK_EVENT_TYPES: typeof WEBHOOK_EVENT_TYPES;
}
