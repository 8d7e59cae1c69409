// The table behind the generic Idempotency-Key helper (http/idempotency.ts).
import { jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Remembers the result of a write per Idempotency-Key (scope:key) so a retry does not run it twice. */
export const idempotencyKey = pgTable('idempotency_key', {
  key: text('key').primaryKey(),
  scope: text('scope').notNull(),
  requestHash: text('request_hash').notNull(),
  response: jsonb('response').$type<Record<string, unknown>>(),
  createdAt: tz('created_at').notNull().defaultNow(),
  // The instance running the claimed request and its last sign of life: a claim whose heartbeat is older than
  // DEAD_INSTANCE_MS belongs to a crashed instance and may be taken over by a retry (docs/architecture.md,
  // "Idempotent broadcasts across crashes"). Null on rows written before these columns existed.
  ownerInstance: text('owner_instance'),
  heartbeatAt: tz('heartbeat_at'),
});
