// Owns every SQL statement on notification_preference: reads and partial updates of a user's preferences, the
// one-click unsubscribe, and who among a batch of recipients gets a notification type by email.
import { eq, type SQL, sql } from 'drizzle-orm';
import { accountRelations } from '../auth/accounts.js';
import { type Db, rowsOf, textArray } from '../infra/db.js';
import { notificationPreference } from '../infra/schema/index.js';
import { type EmailRecipient, type PreferenceRow, toPreferences } from './rows.js';
import {
  DEFAULT_EMAIL_TYPES,
  type NotificationType,
  type Preferences,
  type PreferencesPatch,
} from './schemas.js';

export function createPreferencesRepository(db: Db) {
  const exec = async <T>(query: SQL) => rowsOf<T>(await db.execute(query));
  const repo = {
    /**
     * Who among `items` gets `type` by email: a verified address (an unverified one was typed by whoever signed up,
     * not necessarily its owner, so Herald never mails notification content there), not banned, emailEnabled, and
     * the type in emailTypes. With what the email feature needs to write to them: address, locale, digest choice,
     * and the notification's creation time (which digest window it belongs to).
     */
    async emailRecipients(
      items: Array<{ userId: string; notificationId: string }>,
      type: string,
    ): Promise<EmailRecipient[]> {
      if (items.length === 0) return [];
      // Raw SQL: unnest of two parallel arrays joined to the user, preferences and the notification's time.
      const rows = await exec<{
        user_id: string;
        nid: string;
        email: string;
        locale: string | null;
        digest: string;
        created_ms: string | number;
      }>(
        sql`select x.user_id, x.nid, u.email, u.locale, coalesce(p.email_digest, 'off') as digest,
                   (extract(epoch from n.created_at) * 1000)::bigint as created_ms
            from unnest(${textArray(items.map((i) => i.userId))}, ${textArray(items.map((i) => i.notificationId))})
              as x(user_id, nid)
            join ${accountRelations.notificationEmail} u on u.id = x.user_id
            join notification n on n.id = x.nid::uuid
            left join notification_preference p on p.user_id = x.user_id
            where coalesce(p.email_enabled, true)
              and ${type} = any(coalesce(p.email_types, ${textArray(DEFAULT_EMAIL_TYPES)}))`,
      );
      return rows.map((r) => ({
        userId: r.user_id,
        notificationId: r.nid,
        email: r.email,
        locale: r.locale,
        digest: r.digest === 'hourly' || r.digest === 'daily' ? r.digest : 'off',
        createdAtMs: Number(r.created_ms),
      }));
    },

    /**
     * One-click unsubscribe (CONTRACT §12): removes `type` from the user's emailTypes (the default set when unset),
     * or with null turns email off. False when the user no longer exists.
     */
    async unsubscribeEmail(userId: string, type: NotificationType | null): Promise<boolean> {
      const defaults = textArray(DEFAULT_EMAIL_TYPES);
      const rows = await exec<{ user_id: string }>(
        type === null
          ? sql`insert into notification_preference (user_id, email_enabled)
                select a.id, false from ${accountRelations.ids} a where a.id = ${userId}
                on conflict (user_id) do update set email_enabled = false, updated_at = now()
                returning user_id`
          : sql`insert into notification_preference (user_id, email_types)
                select a.id, array_remove(${defaults}, ${type}) from ${accountRelations.ids} a where a.id = ${userId}
                on conflict (user_id) do update
                  set email_types = array_remove(coalesce(notification_preference.email_types, ${defaults}), ${type}),
                      updated_at = now()
                returning user_id`,
      );
      return rows.length > 0;
    },

    async getPreferences(userId: string): Promise<Preferences> {
      // Race-free first read: concurrent callers both "insert", one wins, both read the same row.
      await db
        .insert(notificationPreference)
        .values({ userId })
        .onConflictDoNothing({ target: notificationPreference.userId });
      const [row] = await db
        .select()
        .from(notificationPreference)
        .where(eq(notificationPreference.userId, userId));
      if (!row) throw new Error('preferences row missing after upsert');
      return toPreferences({
        email_enabled: row.emailEnabled,
        push_enabled: row.pushEnabled,
        email_types: row.emailTypes,
        push_types: row.pushTypes,
        email_digest: row.emailDigest,
        created_at: row.createdAt,
        updated_at: row.updatedAt,
      });
    },

    async updatePreferences(userId: string, patch: PreferencesPatch): Promise<Preferences> {
      const cols: string[] = [];
      const vals: SQL[] = [];
      const add = (col: string, value: SQL) => {
        cols.push(col);
        vals.push(value);
      };
      if (patch.emailEnabled !== undefined) add('email_enabled', sql`${patch.emailEnabled}`);
      if (patch.pushEnabled !== undefined) add('push_enabled', sql`${patch.pushEnabled}`);
      const arr = (v: string[] | null) => (v === null ? sql`null::text[]` : textArray([...new Set(v)]));
      if (patch.emailTypes !== undefined) add('email_types', arr(patch.emailTypes));
      if (patch.pushTypes !== undefined) add('push_types', arr(patch.pushTypes));
      if (patch.emailDigest !== undefined) add('email_digest', sql`${patch.emailDigest}`);
      if (cols.length === 0) return repo.getPreferences(userId);
      // Raw SQL: a partial upsert whose text[] values go through textArray (same on node-postgres and PGlite).
      const insertCols = sql.raw(['user_id', ...cols].join(', '));
      const sets = sql.raw([...cols.map((c) => `${c} = excluded.${c}`), 'updated_at = now()'].join(', '));
      const [row] = await exec<PreferenceRow>(
        sql`insert into notification_preference (${insertCols}) values (${sql.join([sql`${userId}`, ...vals], sql`, `)})
            on conflict (user_id) do update set ${sets} returning *`,
      );
      if (!row) throw new Error('preferences upsert returned nothing');
      return toPreferences(row);
    },
  };
  return repo;
}
