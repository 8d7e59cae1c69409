// The table owned by the admin feature (server/src/admin): asynchronous broadcasts and their progress.
import { sql } from 'drizzle-orm';
import { index, integer, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * One accepted asynchronous send (`202` from POST /admin/notifications/send). Any instance runs it: the row is
 * claimed with an owner and a heartbeat (taken over when the heartbeat goes stale, released at shutdown), and
 * every user gets at most one notification per send through the notifications' per-user source key, so a
 * resumed run finishes the job exactly once per user. Counts grow as batches commit.
 */
export const broadcastSend = pgTable(
  'broadcast_send',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    /** Whose send it is: `user:<id>` (admin session) or `api-key:<id>`; Idempotency-Keys are per scope. */
    scope: text('scope').notNull(),
    idempotencyKey: text('idempotency_key'),
    requestHash: text('request_hash').notNull(),
    body: jsonb('body').notNull(),
    /** queued → running → done | failed. */
    status: text('status').notNull().default('queued'),
    targetCount: integer('target_count').notNull().default(0),
    createdCount: integer('created_count').notNull().default(0),
    skippedCount: integer('skipped_count').notNull().default(0),
    failures: jsonb('failures').$type<Array<{ identifier: string; reason: string }>>().notNull().default([]),
    error: text('error'),
    attempts: integer('attempts').notNull().default(0),
    ownerInstance: text('owner_instance'),
    heartbeatAt: tz('heartbeat_at'),
    createdAt: tz('created_at').notNull().defaultNow(),
    finishedAt: tz('finished_at'),
  },
  (t) => [
    uniqueIndex('broadcast_send_scope_key_idx')
      .on(t.scope, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    index('broadcast_send_open_idx').on(t.createdAt).where(sql`${t.status} in ('queued', 'running')`),
  ],
);
