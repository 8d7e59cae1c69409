// The tables owned by the webhooks feature (server/src/webhooks): endpoints and their durable delivery queue.
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  index,
  integer,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { user } from './auth.js';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * One subscriber. `secret` is the signing secret encrypted with a key derived from AUTH_SECRET (AES-256-GCM,
 * webhooks/secret.ts): it must be recoverable to sign, and a leaked database dump alone cannot forge deliveries.
 */
export const webhookEndpoint = pgTable(
  'webhook_endpoint',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    url: text('url').notNull(),
    events: text('events').array().notNull(),
    description: text('description'),
    secret: text('secret').notNull(),
    /** The secret before the last rotation, sealed like `secret`; deliveries carry both signatures until it expires. */
    previousSecret: text('previous_secret'),
    previousSecretExpiresAt: tz('previous_secret_expires_at'),
    /** A disabled endpoint is offered no new events and its queued deliveries wait until it is enabled again. */
    enabled: boolean('enabled').notNull().default(true),
    createdBy: text('created_by').references(() => user.id, { onDelete: 'set null' }),
    createdAt: tz('created_at').notNull().defaultNow(),
  },
  (t) => [index('webhook_endpoint_created_at_idx').on(t.createdAt)],
);

/**
 * The delivery queue and log: one row per event and subscribed endpoint, claimed with a lease (FOR UPDATE SKIP
 * LOCKED), carrying its last attempt's outcome; finished rows are pruned after 7 days by the retention job.
 * `body` is the exact JSON sent (and signed), so every retry sends the same bytes under the same `event_id`.
 */
export const webhookDelivery = pgTable(
  'webhook_delivery',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    endpointId: uuid('endpoint_id')
      .notNull()
      .references(() => webhookEndpoint.id, { onDelete: 'cascade' }),
    /** The `webhook-id` header: one per event, shared by every endpoint the event goes to. */
    eventId: text('event_id').notNull(),
    type: text('type').notNull(),
    body: text('body').notNull(),
    /** pending → delivered | failed. */
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: tz('next_attempt_at').notNull().defaultNow(),
    lockedUntil: tz('locked_until'),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    lastAttemptAt: tz('last_attempt_at'),
    createdAt: tz('created_at').notNull().defaultNow(),
    deliveredAt: tz('delivered_at'),
  },
  (t) => [
    uniqueIndex('webhook_delivery_endpoint_event_idx').on(t.endpointId, t.eventId),
    // The claim walks each endpoint's due rows in order.
    index('webhook_delivery_due_idx')
      .on(t.endpointId, t.nextAttemptAt, t.id)
      .where(sql`${t.status} = 'pending'`),
    // Same order as the delivery list's `created_at desc, id desc` (NULLS FIRST), so the index can serve it.
    index('webhook_delivery_endpoint_created_desc_idx').on(
      t.endpointId,
      t.createdAt.desc().nullsFirst(),
      t.id.desc().nullsFirst(),
    ),
    index('webhook_delivery_finished_created_idx').on(t.createdAt).where(sql`${t.status} <> 'pending'`),
  ],
);
