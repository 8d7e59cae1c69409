// Tables owned by better-auth (core + admin + username plugins). Field names follow better-auth's schema.
import { boolean, index, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const user = pgTable(
  'user',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    email: text('email').notNull().unique(),
    emailVerified: boolean('email_verified').notNull().default(false),
    image: text('image'),
    createdAt: tz('created_at').notNull().defaultNow(),
    updatedAt: tz('updated_at').notNull().defaultNow(),
    role: text('role').default('user'),
    banned: boolean('banned').default(false),
    banReason: text('ban_reason'),
    banExpires: tz('ban_expires'),
    username: text('username').unique(),
    displayUsername: text('display_username'),
    // BCP 47 tag the user's emails are written in (email/locales.ts); null means DEFAULT_LOCALE.
    locale: text('locale'),
  },
  (t) => [index('user_created_at_id_idx').on(t.createdAt, t.id)],
);

export const session = pgTable(
  'session',
  {
    id: text('id').primaryKey(),
    expiresAt: tz('expires_at').notNull(),
    token: text('token').notNull().unique(),
    createdAt: tz('created_at').notNull().defaultNow(),
    updatedAt: tz('updated_at').notNull().defaultNow(),
    ipAddress: text('ip_address'),
    userAgent: text('user_agent'),
    userId: text('user_id')
      .notNull()
      .references(() => user.id, { onDelete: 'cascade' }),
    impersonatedBy: text('impersonated_by'),
  },
  (t) => [index('session_user_id_idx').on(t.userId)],
);

export const account = pgTable(
  'account',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    providerId: text('provider_id').notNull(),
    userId: text('user_id')
      .notNull()
      .references(() => user.id, { onDelete: 'cascade' }),
    accessToken: text('access_token'),
    refreshToken: text('refresh_token'),
    idToken: text('id_token'),
    accessTokenExpiresAt: tz('access_token_expires_at'),
    refreshTokenExpiresAt: tz('refresh_token_expires_at'),
    scope: text('scope'),
    password: text('password'),
    createdAt: tz('created_at').notNull().defaultNow(),
    updatedAt: tz('updated_at').notNull().defaultNow(),
  },
  (t) => [index('account_user_id_idx').on(t.userId)],
);

export const verification = pgTable(
  'verification',
  {
    id: text('id').primaryKey(),
    identifier: text('identifier').notNull(),
    value: text('value').notNull(),
    expiresAt: tz('expires_at').notNull(),
    createdAt: tz('created_at').notNull().defaultNow(),
    updatedAt: tz('updated_at').notNull().defaultNow(),
  },
  (t) => [index('verification_identifier_idx').on(t.identifier)],
);

/**
 * Herald's own table (not better-auth's): store writes of auth state that failed while the store was unreachable
 * (a session record that could not be deleted or refreshed, a revocation marker that could not be bumped). The
 * row is committed before the request that caused it returns, and any instance that can reach both stores
 * applies it (deletes `key`, bumps the user's revocation marker) and removes it; see docs/architecture.md
 * "Revocation convergence".
 */
export const authStoreRepair = pgTable('auth_store_repair', {
  id: text('id').primaryKey(),
  /** Store key to delete (relative to the deployment prefix); null when only the user's marker is stale. */
  key: text('key'),
  userId: text('user_id'),
  createdAt: tz('created_at').notNull().defaultNow(),
});
