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

/** Most events one per-user bus message carries. */
export const MAX_EVENTS_PER_USER_MESSAGE = 10;

/** Events for one user (read toggles, deletes, counts). */
const UserEventsSchema = z.object({
  kind: z.literal('user'),
  userId: z.string().min(1),
  events: z
    .array(
      z.object({
        name: z.enum(SSE_EVENT_NAMES),
        data: z.record(z.string(), z.unknown()),
        seq: z.number().int().nonnegative().optional(),
      }),
    )
    .min(1)
    .max(MAX_EVENTS_PER_USER_MESSAGE),
});

/**
 * One created batch: the shared content once, plus what differs per user. Broadcasts send one of these per
 * batch instead of one bus message per user.
 */
const BatchSchema = z.object({
  kind: z.literal('batch'),
  template: NotificationSchema.omit({ id: true, userId: true, createdAt: true, updatedAt: true }),
  items: z
    .array(
      z.object({
        userId: z.string().min(1),
        id: z.string().min(1),
        seq: z.number().int().nonnegative(),
        createdAt: z.string(),
        unreadCount: z.number().int().nonnegative(),
      }),
    )
    .min(1),
});

export const NotificationBusMessageSchema = z.discriminatedUnion('kind', [UserEventsSchema, BatchSchema]);
export type NotificationBusMessage = z.infer<typeof NotificationBusMessageSchema>;
export type UserEventsMessage = z.infer<typeof UserEventsSchema>;
export type BatchMessage = z.infer<typeof BatchSchema>;

/** Keeps one bus message well under BUS_MAX_PAYLOAD_BYTES even with large batch sizes. */
export const MAX_ITEMS_PER_BUS_MESSAGE = 1000;
