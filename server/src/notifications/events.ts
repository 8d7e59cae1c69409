// Owns the bus messages that carry notification events to every instance's SSE hub, and their validation.
import { z } from 'zod';
import { NotificationSchema } from './schemas.js';

export const NOTIFICATION_EVENTS_TOPIC = 'notifications.events';

export const SSE_EVENT_NAMES = [
  'connected',
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
  'keep_alive',
  'error',
] as const;
export type SseEventName = (typeof SSE_EVENT_NAMES)[number];

/** Schema-level cap on events in one per-user bus message; the publisher bounds messages by bytes first. */
export const MAX_EVENTS_PER_USER_MESSAGE = 5_000;

const LoggedEventNameSchema = z.enum([
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
]);

/** Committed events of one user, each with its seq (the user's event cursor). */
const UserEventsSchema = z.object({
  kind: z.literal('user'),
  userId: z.string().min(1),
  events: z
    .array(
      z.object({
        seq: z.number().int().positive(),
        name: LoggedEventNameSchema,
        data: z.record(z.string(), z.unknown()),
      }),
    )
    .min(1)
    .max(MAX_EVENTS_PER_USER_MESSAGE),
});

/**
 * One created batch: the shared content once, plus what differs per user. Broadcasts send one of these per
 * batch instead of one bus message per user. Each item's new_notification has \`seq\`, its
 * unread_count_changed \`seq + 1\`.
 */
const BatchSchema = z.object({
  kind: z.literal('batch'),
  template: NotificationSchema.omit({ id: true, userId: true, createdAt: true, updatedAt: true }),
  items: z
    .array(
      z.object({
        userId: z.string().min(1),
        id: z.string().min(1),
        seq: z.number().int().positive(),
        createdAt: z.string(),
        unreadCount: z.number().int().nonnegative(),
      }),
    )
    .min(1),
});

/**
 * "These users have events up to seq in the log": sent instead of the events themselves when they would not
 * fit in one bus message. Hubs read the log, so nothing is dropped for being large.
 */
const SyncSchema = z.object({
  kind: z.literal('sync'),
  users: z.array(z.object({ userId: z.string().min(1), seq: z.number().int().positive() })).min(1),
});

export const NotificationBusMessageSchema = z.discriminatedUnion('kind', [
  UserEventsSchema,
  BatchSchema,
  SyncSchema,
]);
export type NotificationBusMessage = z.infer<typeof NotificationBusMessageSchema>;
export type UserEventsMessage = z.infer<typeof UserEventsSchema>;
export type BatchMessage = z.infer<typeof BatchSchema>;
export type SyncMessage = z.infer<typeof SyncSchema>;
