// Owns every SQL statement on the notification and notification_preference tables.
import { type SQL, sql } from 'drizzle-orm';
import { type Db, rowsOf } from '../infra/db.js';
import {
  type Counts,
  DEFAULT_EMAIL_TYPES,
  DEFAULT_PUSH_TYPES,
  type ListQuery,
  NOTIFICATION_TYPES,
  type Notification,
  type NotificationType,
  type Preferences,
  type PreferencesPatch,
} from './schemas.js';

interface NotificationRow {
  id: string;
  user_id: string;
  seq: string | number;
  type: NotificationType;
  title: string;
  content: string;
  metadata: Record<string, unknown> | null;
  read: boolean;
  created_at: Date | string;
  updated_at: Date | string;
}

const iso = (v: Date | string) => (v instanceof Date ? v : new Date(v)).toISOString();

export interface StoredNotification extends Notification {
  seq: number;
}

export function toNotification(row: NotificationRow): StoredNotification {
  return {
    id: row.id,
    userId: row.user_id,
    type: row.type,
    title: row.title,
    content: row.content,
    metadata: row.metadata ?? {},
    read: row.read,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    seq: Number(row.seq),
  };
}

export function publicNotification(n: StoredNotification): Notification {
  const { seq: _seq, ...rest } = n;
  return rest;
}

const COLUMNS = sql.raw(
  'id, user_id, seq::text as seq, type, title, content, metadata, read, created_at, updated_at',
);

/** `%`, `_` and the escape character itself match literally inside the ILIKE pattern. */
export function likePattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export interface PreferenceRow {
  email_enabled: boolean;
  push_enabled: boolean;
  email_types: string[] | null;
  push_types: string[] | null;
  created_at: Date | string;
  updated_at: Date | string;
}

function toPreferences(row: PreferenceRow): Preferences {
  return {
    emailEnabled: row.email_enabled,
    pushEnabled: row.push_enabled,
    emailTypes: (row.email_types ?? DEFAULT_EMAIL_TYPES) as NotificationType[],
    pushTypes: (row.push_types ?? DEFAULT_PUSH_TYPES) as NotificationType[],
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** text[] parameter that works on node-postgres and PGlite alike. */
export function textArray(values: string[]): SQL {
  return sql`${`{${values.map((v) => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`}::text[]`;
}

export interface NewRowTemplate {
  type: NotificationType;
  title: string;
  content: string;
  metadata: Record<string, unknown>;
}

export function createNotificationRepository(db: Db) {
  const exec = async <T>(query: SQL) => rowsOf<T>(await db.execute(query));

  return {
    async list(userId: string, q: ListQuery): Promise<{ rows: StoredNotification[]; totalCount: number }> {
      const where: SQL[] = [sql`user_id = ${userId}`];
      if (q.filter === 'read') where.push(sql`read = true`);
      if (q.filter === 'unread') where.push(sql`read = false`);
      if (q.type) where.push(sql`type = ${q.type}`);
      if (q.search) {
        const pattern = likePattern(q.search);
        where.push(sql`(title ilike ${pattern} escape '\\' or content ilike ${pattern} escape '\\')`);
      }
      const cond = sql.join(where, sql` and `);
      const offset = (q.page - 1) * q.limit;
      // NB: `seq` is selected as text (int8 precision), so ORDER BY must name notification.seq explicitly.
      // Page and count run side by side on separate pool connections; both use the (user_id, created_at, id)
      // indexes (the partial one for unread), so neither walks more than the user's matching rows.
      const [rows, count] = await Promise.all([
        exec<NotificationRow>(
          sql`select ${COLUMNS} from notification where ${cond} order by created_at desc, id desc limit ${q.limit} offset ${offset}`,
        ),
        exec<{ n: number }>(sql`select count(*)::int as n from notification where ${cond}`),
      ]);
      return { rows: rows.map(toNotification), totalCount: Number(count[0]?.n ?? 0) };
    },

    async counts(userId: string): Promise<Counts> {
      const perType = sql.join(
        NOTIFICATION_TYPES.map((t) => sql`count(*) filter (where type = ${t})::int as ${sql.identifier(t)}`),
        sql`, `,
      );
      const [row] = await exec<Record<string, number>>(
        sql`select count(*)::int as "all", count(*) filter (where read)::int as "read",
              count(*) filter (where not read)::int as "unread", ${perType}
            from notification where user_id = ${userId}`,
      );
      const r = row ?? {};
      return {
        byStatus: { all: Number(r.all ?? 0), read: Number(r.read ?? 0), unread: Number(r.unread ?? 0) },
        byType: Object.fromEntries(NOTIFICATION_TYPES.map((t) => [t, Number(r[t] ?? 0)])) as Counts['byType'],
      };
    },

    async unreadCount(userId: string): Promise<number> {
      const [row] = await exec<{ n: number }>(
        sql`select count(*)::int as n from notification where user_id = ${userId} and read = false`,
      );
      return Number(row?.n ?? 0);
    },

    async unreadCounts(userIds: string[]): Promise<Map<string, number>> {
      const result = new Map<string, number>(userIds.map((id) => [id, 0]));
      if (userIds.length === 0) return result;
      const rows = await exec<{ user_id: string; n: number }>(
        sql`select user_id, count(*)::int as n from notification
            where user_id = any(${textArray(userIds)}) and read = false group by user_id`,
      );
      for (const r of rows) result.set(r.user_id, Number(r.n));
      return result;
    },

    async find(userId: string, id: string): Promise<StoredNotification | null> {
      const [row] = await exec<NotificationRow>(
        sql`select ${COLUMNS} from notification where id = ${id}::uuid and user_id = ${userId}`,
      );
      return row ? toNotification(row) : null;
    },

    /** Sets read; returns the row and whether it changed, or null when missing / someone else's. */
    async setRead(
      userId: string,
      id: string,
      read: boolean,
    ): Promise<{ notification: StoredNotification; changed: boolean } | null> {
      const [row] = await exec<NotificationRow>(
        sql`update notification set read = ${read}, updated_at = now()
            where id = ${id}::uuid and user_id = ${userId} and read <> ${read} returning ${COLUMNS}`,
      );
      if (row) return { notification: toNotification(row), changed: true };
      const existing = await this.find(userId, id);
      return existing ? { notification: existing, changed: false } : null;
    },

    /** Marks every unread notification read; returns the changed rows (oldest first) for the SSE events. */
    async markAllRead(userId: string): Promise<StoredNotification[]> {
      const rows = await exec<NotificationRow>(
        sql`update notification set read = true, updated_at = now()
            where user_id = ${userId} and read = false returning ${COLUMNS}`,
      );
      return rows.map(toNotification).sort((a, b) => a.seq - b.seq);
    },

    /** Deletes one; returns whether it was unread, or null when missing / someone else's. */
    async remove(userId: string, id: string): Promise<{ wasUnread: boolean } | null> {
      const [row] = await exec<{ read: boolean }>(
        sql`delete from notification where id = ${id}::uuid and user_id = ${userId} returning read`,
      );
      return row ? { wasUnread: !row.read } : null;
    },

    async removeAll(userId: string): Promise<{ deleted: number; unreadDeleted: number }> {
      const [row] = await exec<{ n: number; u: number }>(
        sql`with d as (delete from notification where user_id = ${userId} returning read)
            select count(*)::int as n, count(*) filter (where not read)::int as u from d`,
      );
      return { deleted: Number(row?.n ?? 0), unreadDeleted: Number(row?.u ?? 0) };
    },

    /** new_notification rows after a cursor, in cursor order (SSE resume). */
    async after(userId: string, seq: number, limit: number): Promise<StoredNotification[]> {
      const rows = await exec<NotificationRow>(
        sql`select ${COLUMNS} from notification where user_id = ${userId} and seq > ${seq}
            order by notification.seq asc limit ${limit}`,
      );
      return rows.map(toNotification);
    },

    async maxSeq(userId: string): Promise<number> {
      const [row] = await exec<{ s: string | null }>(
        sql`select max(seq)::text as s from notification where user_id = ${userId}`,
      );
      return row?.s ? Number(row.s) : 0;
    },

    /**
     * One multi-row INSERT of the same notification for many users. Users that no longer exist are skipped
     * by the join instead of failing the whole batch on the foreign key.
     */
    async insertForUsers(userIds: string[], t: NewRowTemplate): Promise<StoredNotification[]> {
      if (userIds.length === 0) return [];
      const rows = await exec<NotificationRow>(
        sql`insert into notification (user_id, type, title, content, metadata)
            select u.id, ${t.type}, ${t.title}, ${t.content}, ${JSON.stringify(t.metadata)}::jsonb
            from unnest(${textArray(userIds)}) with ordinality as x(id, ord)
            join "user" u on u.id = x.id
            order by x.ord
            returning ${COLUMNS}`,
      );
      return rows.map(toNotification);
    },

    async getPreferences(userId: string): Promise<Preferences> {
      // Race-free first read: concurrent callers both "insert", one wins, both read the same row.
      await db.execute(
        sql`insert into notification_preference (user_id) values (${userId}) on conflict (user_id) do nothing`,
      );
      const [row] = await exec<PreferenceRow>(
        sql`select * from notification_preference where user_id = ${userId}`,
      );
      if (!row) throw new Error('preferences row missing after upsert');
      return toPreferences(row);
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
      if (cols.length === 0) return this.getPreferences(userId);
      const insertCols = sql.raw(['user_id', ...cols].join(', '));
      const sets = sql.raw([...cols.map((c) => `${c} = excluded.${c}`), 'updated_at = now()'].join(', '));
      const [row] = await exec<PreferenceRow>(
        sql`insert into notification_preference (${insertCols}) values (${sql.join([sql`${userId}`, ...vals], sql`, `)})
            on conflict (user_id) do update set ${sets} returning *`,
      );
      if (!row) throw new Error('preferences upsert returned nothing');
      return toPreferences(row);
    },

    /** Email address and email preferences of users (defaults when they never saved preferences). */
    async emailTargets(
      userIds: string[],
    ): Promise<Array<{ userId: string; email: string; emailEnabled: boolean; emailTypes: string[] }>> {
      if (userIds.length === 0) return [];
      const rows = await exec<{
        id: string;
        email: string;
        email_enabled: boolean | null;
        email_types: string[] | null;
      }>(
        sql`select u.id, u.email, p.email_enabled, p.email_types
            from "user" u left join notification_preference p on p.user_id = u.id
            where u.id = any(${textArray(userIds)})`,
      );
      return rows.map((r) => ({
        userId: r.id,
        email: r.email,
        emailEnabled: r.email_enabled ?? true,
        emailTypes: r.email_types ?? DEFAULT_EMAIL_TYPES,
      }));
    },
  };
}

export type NotificationRepository = ReturnType<typeof createNotificationRepository>;
