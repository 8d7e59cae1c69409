// The table owned by the api-keys feature (server/src/api-keys): server-to-server credentials.
import { index, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { user } from './auth.js';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * One API key. The key itself is never stored: `key_hash` is the hex SHA-256 of it (a 256-bit random key needs
 * no slow hash), looked up through its unique index on every use. Revoking deletes the row.
 */
export const apiKey = pgTable(
  'api_key',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    name: text('name').notNull(),
    scopes: text('scopes').array().notNull(),
    /** The first characters of the key (`hk_` + 8), so operators can tell keys apart. */
    prefix: text('prefix').notNull(),
    keyHash: text('key_hash').notNull(),
    createdBy: text('created_by').references(() => user.id, { onDelete: 'set null' }),
    createdAt: tz('created_at').notNull().defaultNow(),
    expiresAt: tz('expires_at'),
    lastUsedAt: tz('last_used_at'),
  },
  (t) => [uniqueIndex('api_key_key_hash_idx').on(t.keyHash), index('api_key_created_at_idx').on(t.createdAt)],
);
