// The tables owned by the Web Push feature (server/src/push): browsers' subscriptions and the durable queue of
// push messages (docs/architecture.md, "Web Push").
import { sql } from 'drizzle-orm';
import { bigint, index, integer, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { user } from './auth.js';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * One browser's PushSubscription. `endpoint` is unique: the browser that subscribes again (after another user
 * signed in on it) moves the row to the new owner instead of adding a second one.
 */
export const pushSubscription = pgTable(
  'push_subscription',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    userId: text('user_id')
      .notNull()
      .references(() => user.id, { onDelete: 'cascade' }),
    endpoint: text('endpoint').notNull(),
    /** The push service's origin (scheme://host[:port]): the VAPID audience and the per-service concurrency key. */
    pushService: text('push_service').notNull(),
    /** base64url, the browser's P-256 public key (65 bytes) and auth secret (16 bytes) of RFC 8291. */
    p256dh: text('p256dh').notNull(),
    auth: text('auth').notNull(),
    expirationTime: tz('expiration_time'),
    /** The subscribing browser's User-Agent (cut), to tell devices apart in the list. */
    userAgent: text('user_agent'),
    createdAt: tz('created_at').notNull().defaultNow(),
    /** Last time a browser (re)subscribed this endpoint. */
    updatedAt: tz('updated_at').notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('push_subscription_endpoint_idx').on(t.endpoint),
    index('push_subscription_user_idx').on(t.userId, t.updatedAt),
  ],
);

/**
 * The push queue and log: one row per notification and subscription, claimed with a lease (FOR UPDATE SKIP
 * LOCKED). No foreign keys on purpose: a broadcast inserts hundreds of thousands of rows and per-row FK triggers
 * would dominate it; rows whose subscription or notification disappeared are settled as `cancelled` when
 * claimed (so removing a subscription needs no statement on this table, and no index on subscription_id is
 * kept up by every insert). The message itself is built at send time from the notification row (nothing is
 * copied per user).
 * status: pending → sent | failed (given up, or a 4xx) | gone (404/410: subscription removed) | cancelled.
 */
export const pushDelivery = pgTable(
  'push_delivery',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    notificationId: uuid('notification_id').notNull(),
    subscriptionId: uuid('subscription_id').notNull(),
    userId: text('user_id').notNull(),
    pushService: text('push_service').notNull(),
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: tz('next_attempt_at').notNull().defaultNow(),
    lockedUntil: tz('locked_until'),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    createdAt: tz('created_at').notNull().defaultNow(),
    lastAttemptAt: tz('last_attempt_at'),
    sentAt: tz('sent_at'),
  },
  (t) => [
    // One message per notification and browser, however often delivery runs for it (a resumed broadcast).
    uniqueIndex('push_delivery_notification_subscription_idx').on(t.notificationId, t.subscriptionId),
    index('push_delivery_due_idx').on(t.nextAttemptAt, t.id).where(sql`${t.status} = 'pending'`),
    index('push_delivery_finished_created_idx').on(t.createdAt).where(sql`${t.status} <> 'pending'`),
  ],
);
