// The notification tables, owned by notifications/ (notification, notification_cursor, notification_event,
// notification_preference), and the email tables defined beside them: email_outbox and email_body, owned by
// infra/email-outbox.ts, and email_digest, owned by email/ (docs/architecture.md, "Owners").
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { user } from './auth.js';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const notification = pgTable(
  'notification',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    userId: text('user_id')
      .notNull()
      .references(() => user.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    title: text('title').notNull(),
    content: text('content').notNull(),
    metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default({}),
    read: boolean('read').notNull().default(false),
    createdAt: tz('created_at').notNull().defaultNow(),
    updatedAt: tz('updated_at').notNull().defaultNow(),
    // Set by idempotent bulk sends (admin broadcast with an Idempotency-Key): one row per user and key, so a
    // send resumed after a crash skips the users it already reached.
    sourceKey: text('source_key'),
  },
  (t) => [
    uniqueIndex('notification_user_source_key_idx')
      .on(t.userId, t.sourceKey)
      .where(sql`${t.sourceKey} is not null`),
    // The list orders by `created_at desc, id desc`, which PostgreSQL reads as NULLS FIRST: the indexes must say
    // the same (drizzle's bare .desc() emits NULLS LAST, an order the planner cannot use for that ORDER BY even on
    // NOT NULL columns), or a page turns into a scan of the global created_at index plus a sort.
    index('notification_user_created_desc_idx').on(
      t.userId,
      t.createdAt.desc().nullsFirst(),
      t.id.desc().nullsFirst(),
    ),
    index('notification_user_unread_desc_idx')
      .on(t.userId, t.createdAt.desc().nullsFirst(), t.id.desc().nullsFirst())
      .where(sql`${t.read} = false`),
    // Serves the type-filtered list in order and, with `read` as a trailing column (drizzle has no INCLUDE), lets
    // GET /notification/counts count a user's rows by type and status from this index alone.
    index('notification_user_type_created_desc_idx').on(
      t.userId,
      t.type,
      t.createdAt.desc().nullsFirst(),
      t.id.desc().nullsFirst(),
      t.read,
    ),
    index('notification_created_idx').on(t.createdAt),
    // No trigram (pg_trgm GIN) index on title or content: search is always within one user's rows, which
    // retention bounds (RETENTION_MAX_PER_USER, 1,000 by default), and walking that user's index range and
    // filtering was faster than the trigram indexes for such a user (3–6 ms against 7–16 ms), while the two indexes
    // were ~45 % of every broadcast batch's statement (each row re-indexes the same ~100 trigrams). Migration 0016.
  ],
);

/**
 * Per-user event cursor and unread count. Every change to a user's notifications updates this row first, in
 * the same transaction: the row lock orders concurrent writers of one user, so event seqs commit in seq order
 * and contiguously (docs/architecture.md, "Ordering and convergence").
 */
export const notificationCursor = pgTable('notification_cursor', {
  userId: text('user_id')
    .primaryKey()
    .references(() => user.id, { onDelete: 'cascade' }),
  lastSeq: bigint('last_seq', { mode: 'number' }).notNull().default(0),
  unread: integer('unread').notNull().default(0),
});

/**
 * The per-user log of state-changing SSE events, replayed on resume. Notification content is not copied here:
 * events that carry a notification reference it and are replayed with its current state.
 */
export const notificationEvent = pgTable(
  'notification_event',
  {
    // No foreign key to "user": its per-row check was ~15 % of a broadcast batch's statement (two event rows per
    // user). Every writer of this table updates the user's notification_cursor row in the same transaction, and
    // that row's own foreign key (or the notification row's, in a broadcast) already holds the user row's
    // key-share lock, so no event can commit for a user deleted meanwhile. The cascade is the statement-level
    // trigger `user_delete_notification_events` (migration 0017).
    userId: text('user_id').notNull(),
    seq: bigint('seq', { mode: 'number' }).notNull(),
    kind: text('kind').notNull(),
    notificationId: uuid('notification_id'),
    data: jsonb('data').$type<Record<string, unknown>>(),
    createdAt: tz('created_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.userId, t.seq] }),
    index('notification_event_created_idx').on(t.createdAt),
  ],
);

export const notificationPreference = pgTable('notification_preference', {
  userId: text('user_id')
    .primaryKey()
    .references(() => user.id, { onDelete: 'cascade' }),
  emailEnabled: boolean('email_enabled').notNull().default(true),
  pushEnabled: boolean('push_enabled').notNull().default(false),
  // null means "the default set" (contract: an unset emailTypes means the default set).
  emailTypes: text('email_types').array(),
  pushTypes: text('push_types').array(),
  // off | hourly | daily (CONTRACT §12): notification emails are gathered into one digest per window.
  emailDigest: text('email_digest').notNull().default('off'),
  createdAt: tz('created_at').notNull().defaultNow(),
  updatedAt: tz('updated_at').notNull().defaultNow(),
});

/**
 * An email body shared by many outbox rows (a broadcast's notification email, rendered once per locale): the rows
 * carry only their recipient and the text that replaces `placeholder` (their own unsubscribe link), so a send to
 * 100,000 users stores the multi-kilobyte body once instead of 100,000 times (issue 27: 3.4 KB on disk and 3.2 KB
 * of WAL per queued email before, 0.65 / 0.86 KB after). Deleted by the outbox's housekeeping once no row refers
 * to it.
 */
export const emailBody = pgTable('email_body', {
  id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
  subject: text('subject').notNull(),
  text: text('text_body').notNull(),
  html: text('html_body').notNull(),
  headers: jsonb('headers').$type<Record<string, string>>(),
  placeholder: text('placeholder').notNull(),
  createdAt: tz('created_at').notNull().defaultNow(),
});

/** Durable email queue (outbox) drained with FOR UPDATE SKIP LOCKED; works on PostgreSQL and PGlite. */
export const emailOutbox = pgTable(
  'email_outbox',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    // Makes enqueueing idempotent (e.g. one email per notification id).
    dedupeKey: text('dedupe_key').unique(),
    to: text('to_address').notNull(),
    subject: text('subject').notNull(),
    text: text('text_body').notNull(),
    html: text('html_body').notNull(),
    // Extra headers (List-Unsubscribe, Content-Language), rendered with the message.
    headers: jsonb('headers').$type<Record<string, string>>(),
    status: text('status').notNull().default('pending'),
    attempts: bigint('attempts', { mode: 'number' }).notNull().default(0),
    nextAttemptAt: tz('next_attempt_at').notNull().defaultNow(),
    lockedUntil: tz('locked_until'),
    lastError: text('last_error'),
    createdAt: tz('created_at').notNull().defaultNow(),
    sentAt: tz('sent_at'),
    // A row of a shared body (email_body): subject, text and html are empty here and come from the body, with its
    // placeholder replaced by fill_text (text and headers) and fill_html (html, already escaped). No foreign key:
    // its check would cost a lookup per queued row; the claim treats a missing body as a failed attempt.
    bodyId: bigint('body_id', { mode: 'number' }),
    // Such a row's address; its to_address stays empty, so an instance of a version before email_body that
    // claims it during a rolling upgrade cannot send it (no recipient: a failed attempt, retried) instead of
    // sending an empty email.
    recipient: text('recipient'),
    fillText: text('fill_text'),
    fillHtml: text('fill_html'),
  },
  (t) => [
    // (next_attempt_at, id): the claim's order. Rows queued by one statement share next_attempt_at, so an index on
    // that column alone left the claim sorting the whole backlog for every 20 rows (docs/performance.md "Outbox
    // drain").
    index('email_outbox_due_idx').on(t.nextAttemptAt, t.id).where(sql`${t.status} = 'pending'`),
    // Housekeeping asks whether any row still refers to a body.
    index('email_outbox_body_idx').on(t.bodyId).where(sql`${t.bodyId} is not null`),
  ],
);

/**
 * One digest email per user and window (email/digest.ts): the unique (user_id, window_start) makes scheduling
 * idempotent across instances, and the row is claimed when due with FOR UPDATE SKIP LOCKED plus a lease, like
 * the outbox. status: pending → sent (an outbox row was queued) | empty (nothing unread) | skipped (user banned
 * or email turned off). A deleted user's rows go with the user.
 */
export const emailDigest = pgTable(
  'email_digest',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    userId: text('user_id')
      .notNull()
      .references(() => user.id, { onDelete: 'cascade' }),
    windowStart: tz('window_start').notNull(),
    windowEnd: tz('window_end').notNull(),
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: tz('next_attempt_at').notNull(),
    lockedUntil: tz('locked_until'),
    createdAt: tz('created_at').notNull().defaultNow(),
    finishedAt: tz('finished_at'),
  },
  (t) => [
    uniqueIndex('email_digest_user_window_idx').on(t.userId, t.windowStart),
    // The claim's order, as for the outbox: every digest of one window is due at the same instant.
    index('email_digest_due_idx').on(t.nextAttemptAt, t.id).where(sql`${t.status} = 'pending'`),
  ],
);
