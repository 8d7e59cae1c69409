// Owns every SQL statement on the notification and notification_preference tables. Plain statements use
// Drizzle's builder; raw SQL stays where it earns its place, each with its reason.
import { and, eq, ne, type SQL, sql } from 'drizzle-orm';
import type { EventOutbox } from '../events/outbox.js';
import { type Db, rowsOf, textArray } from '../infra/db.js';
import { notification, notificationCursor, notificationPreference } from '../infra/schema/index.js';
import {
  type Counts,
  DEFAULT_EMAIL_TYPES,
  DEFAULT_PUSH_TYPES,
  type EmailDigest,
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
  type: NotificationType;
  title: string;
  content: string;
  metadata: Record<string, unknown> | null;
  read: boolean;
  created_at: Date | string;
  updated_at: Date | string;
}

const iso = (v: Date | string) => (v instanceof Date ? v : new Date(v)).toISOString();

/** The notification columns as the builder selects and returns them. */
const FIELDS = {
  id: notification.id,
  user_id: notification.userId,
  type: notification.type,
  title: notification.title,
  content: notification.content,
  metadata: notification.metadata,
  read: notification.read,
  created_at: notification.createdAt,
  updated_at: notification.updatedAt,
};

export type StoredNotification = Notification;

export function toNotification(row: NotificationRow): Notification {
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
  };
}

const COLUMNS = sql.raw('id, user_id, type, title, content, metadata, read, created_at, updated_at');
const N_COLUMNS = sql.raw(
  'n.id, n.user_id, n.type, n.title, n.content, n.metadata, n.read, n.created_at, n.updated_at',
);

/** The SSE events that change a user's state; each gets the user's next seq and a row in the event log. */
export const LOGGED_EVENT_KINDS = [
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
] as const;
export type LoggedEventKind = (typeof LOGGED_EVENT_KINDS)[number];

/** One event as written to the log: a notification reference or small data, never notification content. */
interface LogEntry {
  kind: LoggedEventKind;
  notificationId?: string;
  data?: Record<string, unknown>;
}

/** A committed, sequenced event as published on the bus and replayed to streams. */
export interface SeqEvent {
  seq: number;
  name: LoggedEventKind;
  data: Record<string, unknown>;
}

/** A user's cursor: the newest seq issued, the unread count, and the oldest seq still in the log. */
export interface UserCursor {
  lastSeq: number;
  unread: number;
  /** Oldest logged seq, or null when the log holds nothing for the user (pruned or never written). */
  oldestSeq: number | null;
}

interface EventRow extends Partial<NotificationRow> {
  seq: string;
  kind: LoggedEventKind;
  data: Record<string, unknown> | null;
  nid: string | null;
}

export interface CreatedNotification {
  notification: Notification;
  /** Seq of its new_notification event; unread_count_changed follows at seq + 1. */
  seq: number;
  unreadCount: number;
}

/** `%`, `_` and the escape character itself match literally inside the ILIKE pattern. */
export function likePattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export interface EmailRecipient {
  userId: string;
  notificationId: string;
  email: string;
  /** The user's BCP 47 tag, or null for DEFAULT_LOCALE. */
  locale: string | null;
  digest: EmailDigest;
  /** The notification's created_at (database clock), epoch ms. */
  createdAtMs: number;
}

export interface PreferenceRow {
  email_enabled: boolean;
  push_enabled: boolean;
  email_types: string[] | null;
  push_types: string[] | null;
  email_digest: string;
  created_at: Date | string;
  updated_at: Date | string;
}

function toPreferences(row: PreferenceRow): Preferences {
  return {
    emailEnabled: row.email_enabled,
    pushEnabled: row.push_enabled,
    emailTypes: (row.email_types ?? DEFAULT_EMAIL_TYPES) as NotificationType[],
    pushTypes: (row.push_types ?? DEFAULT_PUSH_TYPES) as NotificationType[],
    emailDigest: row.email_digest === 'hourly' || row.email_digest === 'daily' ? row.email_digest : 'off',
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export interface NewRowTemplate {
  type: NotificationType;
  title: string;
  content: string;
  metadata: Record<string, unknown>;
}

type Executor = Pick<Db, 'execute'>;

interface LogRow {
  user_id: string;
  seq: number;
  kind: LoggedEventKind;
  notification_id: string | null;
  data: Record<string, unknown> | null;
}

/** Writes event rows in one statement (a JSON recordset works the same on node-postgres and PGlite). */
// Raw SQL: jsonb_to_recordset multi-row insert (one parameter for any number of rows).
async function insertLog(tx: Executor, rows: LogRow[]): Promise<void> {
  if (rows.length === 0) return;
  await tx.execute(
    sql`insert into notification_event (user_id, seq, kind, notification_id, data)
        select user_id, seq, kind, notification_id, data
        from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
          as x(user_id text, seq bigint, kind text, notification_id uuid, data jsonb)`,
  );
}

/**
 * Appends one user's events inside the transaction that made the change: bumps the cursor (taking its row
 * lock, which orders this user's writers so seqs commit in order and without holes), applies the unread
 * delta, and adds an unread_count_changed event when the count moved. Returns the events as published.
 */
async function appendEvents(
  tx: Executor,
  userId: string,
  entries: Array<LogEntry & { notification?: Notification }>,
  unreadDelta: number,
): Promise<SeqEvent[]> {
  const count = entries.length + (unreadDelta !== 0 ? 1 : 0);
  // Raw SQL: the cursor upsert that takes this user's row lock (seq order), with bigint returned as text.
  const [cursor] = rowsOf<{ last_seq: string; unread: number }>(
    await tx.execute(
      sql`insert into notification_cursor (user_id, last_seq, unread)
          values (${userId}, ${count}, greatest(${unreadDelta}::int, 0))
          on conflict (user_id) do update
            set last_seq = notification_cursor.last_seq + ${count}::int,
                unread = greatest(notification_cursor.unread + ${unreadDelta}::int, 0)
          returning last_seq::text as last_seq, unread`,
    ),
  );
  if (!cursor) throw new Error('cursor upsert returned nothing');
  let seq = Number(cursor.last_seq) - count;
  const events: SeqEvent[] = [];
  const log: LogRow[] = [];
  for (const e of entries) {
    seq++;
    const notificationId = e.notification?.id ?? e.notificationId ?? null;
    log.push({ user_id: userId, seq, kind: e.kind, notification_id: notificationId, data: e.data ?? null });
    events.push({
      seq,
      name: e.kind,
      data: e.notification ? { notification: e.notification } : (e.data ?? {}),
    });
  }
  if (unreadDelta !== 0) {
    seq++;
    const data = { unreadCount: Number(cursor.unread) };
    log.push({ user_id: userId, seq, kind: 'unread_count_changed', notification_id: null, data });
    events.push({ seq, name: 'unread_count_changed', data });
  }
  await insertLog(tx, log);
  return events;
}

declare module '../events/outbox.js' {
  interface DomainEventMap {
    'notification.created': Notification;
    'notification.read': Notification;
  }
}

/**
 * Writes notification.created / notification.read domain events inside the transaction that made the change,
 * so an event exists exactly when its change committed (one multi-row INSERT per consumer per broadcast batch).
 */
async function writeEvents(
  events: Pick<EventOutbox, 'write' | 'wants'> | undefined,
  tx: Executor,
  type: 'notification.created' | 'notification.read',
  notifications: Notification[],
): Promise<void> {
  if (!events || notifications.length === 0 || !events.wants(type)) return;
  await events.write(
    tx,
    notifications.map((n) => ({
      type,
      data: n,
      at: new Date(type === 'notification.created' ? n.createdAt : n.updatedAt),
    })),
  );
}

export function createNotificationRepository(db: Db, domainEvents?: Pick<EventOutbox, 'write' | 'wants'>) {
  const exec = async <T>(query: SQL) => rowsOf<T>(await db.execute(query));

  return {
    /** `via`: where to read (a replica chosen by the read router, docs/architecture.md "Read replicas"). */
    async list(
      userId: string,
      q: ListQuery,
      via: Executor = db,
    ): Promise<{ rows: StoredNotification[]; totalCount: number }> {
      const where: SQL[] = [sql`user_id = ${userId}`];
      if (q.filter === 'read') where.push(sql`read = true`);
      if (q.filter === 'unread') where.push(sql`read = false`);
      if (q.type) where.push(sql`type = ${q.type}`);
      if (q.search) {
        const pattern = likePattern(q.search);
        where.push(sql`(title ilike ${pattern} escape '\\' or content ilike ${pattern} escape '\\')`);
      }
      // Raw SQL: ILIKE … ESCAPE and the seq-free column list have no builder form.
      const cond = sql.join(where, sql` and `);
      const offset = (q.page - 1) * q.limit;
      // Page and count in ONE statement (one pool connection, one round trip: under load the second round trip
      // and pool checkout cost more than the count itself). Both parts use the (user_id, created_at desc, id desc)
      // indexes (the partial one for unread); the count reads only the user's matching index entries. The count
      // row is always there, so a page past the end still reports the total (its page columns are null).
      const rows = rowsOf<Partial<NotificationRow> & { total: number }>(
        await via.execute(sql`select c.total, p.* from (select count(*)::int as total from notification where ${cond}) c
            left join lateral (
              select ${COLUMNS} from notification where ${cond}
              order by created_at desc, id desc limit ${q.limit} offset ${offset}
            ) p on true
            order by p.created_at desc, p.id desc`),
      );
      const totalCount = Number(rows[0]?.total ?? 0);
      const page = rows.filter((r): r is NotificationRow & { total: number } => r.id != null);
      return { rows: page.map(toNotification), totalCount };
    },

    async counts(userId: string, via: Executor = db): Promise<Counts> {
      const perType = sql.join(
        NOTIFICATION_TYPES.map((t) => sql`count(*) filter (where type = ${t})::int as ${sql.identifier(t)}`),
        sql`, `,
      );
      // Raw SQL: count(*) filter (…) per status and type in one scan.
      const [row] = rowsOf<Record<string, number>>(
        await via.execute(
          sql`select count(*)::int as "all", count(*) filter (where read)::int as "read",
                count(*) filter (where not read)::int as "unread", ${perType}
              from notification where user_id = ${userId}`,
        ),
      );
      const r = row ?? {};
      return {
        byStatus: { all: Number(r.all ?? 0), read: Number(r.read ?? 0), unread: Number(r.unread ?? 0) },
        byType: Object.fromEntries(NOTIFICATION_TYPES.map((t) => [t, Number(r[t] ?? 0)])) as Counts['byType'],
      };
    },

    /** The user's unread count, kept exactly in the cursor row by every change (no counting). */
    async unreadCount(userId: string): Promise<number> {
      const [row] = await db
        .select({ n: notificationCursor.unread })
        .from(notificationCursor)
        .where(eq(notificationCursor.userId, userId));
      return Number(row?.n ?? 0);
    },

    async find(userId: string, id: string): Promise<Notification | null> {
      const [row] = await db
        .select(FIELDS)
        .from(notification)
        .where(and(eq(notification.id, id), eq(notification.userId, userId)));
      return row ? toNotification(row as NotificationRow) : null;
    },

    /** Sets read; returns the row, whether it changed and the committed events, or null when missing. */
    async setRead(
      userId: string,
      id: string,
      read: boolean,
    ): Promise<{ notification: Notification; changed: boolean; events: SeqEvent[] } | null> {
      const result = await db.transaction(async (tx) => {
        const [row] = await tx
          .update(notification)
          .set({ read, updatedAt: sql`now()` })
          .where(and(eq(notification.id, id), eq(notification.userId, userId), ne(notification.read, read)))
          .returning(FIELDS);
        if (!row) return null;
        const updated = toNotification(row as NotificationRow);
        if (read) await writeEvents(domainEvents, tx, 'notification.read', [updated]);
        const events = await appendEvents(
          tx,
          userId,
          [{ kind: 'notification_updated', notification: updated }],
          read ? -1 : 1,
        );
        return { notification: updated, changed: true, events };
      });
      if (result) return result;
      const existing = await this.find(userId, id);
      return existing ? { notification: existing, changed: false, events: [] } : null;
    },

    /** Marks every unread notification read; the events carry them oldest first. */
    async markAllRead(userId: string): Promise<{ updatedCount: number; events: SeqEvent[] }> {
      return db.transaction(async (tx) => {
        const rows = await tx
          .update(notification)
          .set({ read: true, updatedAt: sql`now()` })
          .where(and(eq(notification.userId, userId), eq(notification.read, false)))
          .returning(FIELDS);
        if (rows.length === 0) return { updatedCount: 0, events: [] };
        const changed = rows
          .map((r) => toNotification(r as NotificationRow))
          .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
        await writeEvents(domainEvents, tx, 'notification.read', changed);
        const events = await appendEvents(
          tx,
          userId,
          changed.map((notification) => ({ kind: 'notification_updated' as const, notification })),
          -changed.length,
        );
        return { updatedCount: changed.length, events };
      });
    },

    /** Deletes one; returns the committed events, or null when missing / someone else's. */
    async remove(userId: string, id: string): Promise<{ events: SeqEvent[] } | null> {
      return db.transaction(async (tx) => {
        const [row] = await tx
          .delete(notification)
          .where(and(eq(notification.id, id), eq(notification.userId, userId)))
          .returning({ read: notification.read });
        if (!row) return null;
        const events = await appendEvents(
          tx,
          userId,
          [{ kind: 'notification_deleted', data: { notificationId: id } }],
          row.read ? 0 : -1,
        );
        return { events };
      });
    },

    async removeAll(userId: string): Promise<{ deletedCount: number; events: SeqEvent[] }> {
      return db.transaction(async (tx) => {
        // Raw SQL: a CTE delete that counts deleted and unread rows in the same statement.
        const [row] = rowsOf<{ n: number; u: number }>(
          await tx.execute(
            sql`with d as (delete from notification where user_id = ${userId} returning read)
                select count(*)::int as n, count(*) filter (where not read)::int as u from d`,
          ),
        );
        const deletedCount = Number(row?.n ?? 0);
        if (deletedCount === 0) return { deletedCount, events: [] };
        const events = await appendEvents(
          tx,
          userId,
          [{ kind: 'notifications_cleared', data: { deletedCount } }],
          -Number(row?.u ?? 0),
        );
        return { deletedCount, events };
      });
    },

    /** The user's cursor (zeros when nothing was ever written for them). */
    async cursor(userId: string): Promise<UserCursor> {
      // Raw SQL: bigint seqs as text (int8 precision) and the oldest-seq subquery in one round trip.
      const [row] = await exec<{ last_seq: string; unread: number; oldest: string | null }>(
        sql`select c.last_seq::text as last_seq, c.unread,
                   (select min(e.seq)::text from notification_event e where e.user_id = ${userId}) as oldest
            from notification_cursor c where c.user_id = ${userId}`,
      );
      if (!row) return { lastSeq: 0, unread: 0, oldestSeq: null };
      return {
        lastSeq: Number(row.last_seq),
        unread: Number(row.unread),
        oldestSeq: row.oldest === null ? null : Number(row.oldest),
      };
    },

    /** Newest seq of each of these users (absent users have none); one query for every local stream. */
    async lastSeqs(userIds: string[]): Promise<Map<string, number>> {
      const result = new Map<string, number>();
      if (userIds.length === 0) return result;
      // Raw SQL: `= any(text[])` takes one parameter for thousands of users; seqs as text (int8 precision).
      const rows = await exec<{ user_id: string; last_seq: string }>(
        sql`select user_id, last_seq::text as last_seq from notification_cursor
            where user_id = any(${textArray(userIds)})`,
      );
      for (const r of rows) result.set(r.user_id, Number(r.last_seq));
      return result;
    },

    /**
     * Logged events after a cursor, in seq order (SSE resume and gap repair). Events that reference a
     * notification carry its current state; one that has since been deleted is replayed as a
     * notification_deleted under the same seq.
     */
    async eventsAfter(userId: string, afterSeq: number, limit: number): Promise<SeqEvent[]> {
      // Raw SQL: left join onto the current row with seqs as text (int8 precision).
      const rows = await exec<EventRow>(
        sql`select e.seq::text as seq, e.kind, e.data, e.notification_id as nid, ${N_COLUMNS}
            from notification_event e left join notification n on n.id = e.notification_id
            where e.user_id = ${userId} and e.seq > ${afterSeq}
            order by e.seq asc limit ${limit}`,
      );
      return rows.map((r) => {
        if (r.nid === null) return { seq: Number(r.seq), name: r.kind, data: r.data ?? {} };
        if (r.id)
          return {
            seq: Number(r.seq),
            name: r.kind,
            data: { notification: toNotification(r as NotificationRow) },
          };
        // Deleted since: its seq still carries an event (ids stay contiguous for clients that check), one that
        // says what is true now. Applying it is a no-op for a client that never saw the notification.
        return { seq: Number(r.seq), name: 'notification_deleted' as const, data: { notificationId: r.nid } };
      });
    },

    /**
     * Creates the same notification for many users in ONE statement (docs/architecture.md "Broadcast at
     * scale"): the notification rows, each user's cursor bump and both event-log rows (new_notification at
     * seq − 1, unread_count_changed at seq) are data-modifying CTEs of a single INSERT, so a batch costs one
     * round trip and PostgreSQL never ships the rows' content back. Users that no longer exist are skipped
     * by the join. The cursor rows are upserted in user-id order, so concurrent broadcasts cannot deadlock,
     * and the cursor row lock orders every writer of a user (seqs stay contiguous and commit in order).
     * With a sourceKey, users who already have a notification from that key are skipped and returned in
     * `existing` (a resumed idempotent broadcast).
     */
    async insertForUsers(
      requested: string[],
      t: NewRowTemplate,
      sourceKey?: string,
    ): Promise<{ created: CreatedNotification[]; existing: Notification[] }> {
      const userIds = [...new Set(requested)];
      if (userIds.length === 0) return { created: [], existing: [] };
      // One statement is atomic on its own: no BEGIN/COMMIT round trips.
      // Raw SQL: data-modifying CTEs (insert → cursor upsert → event rows) with `on conflict … where`
      // inference on the partial unique index; bigint seqs come back as text (int8 precision).
      const write = async (ex: Executor) => {
        const rows = rowsOf<{
          id: string;
          user_id: string;
          created_at: Date | string;
          seq: string;
          unread: number;
        }>(
          await ex.execute(
            sql`with ins as (
                  insert into notification (user_id, type, title, content, metadata, source_key)
                  select u.id, ${t.type}, ${t.title}, ${t.content}, ${JSON.stringify(t.metadata)}::jsonb, ${sourceKey ?? null}
                  from unnest(${textArray(userIds)}) with ordinality as x(id, ord)
                  join "user" u on u.id = x.id
                  order by x.ord
                  on conflict (user_id, source_key) where source_key is not null do nothing
                  returning id, user_id, created_at
                ), cur as (
                  insert into notification_cursor (user_id, last_seq, unread)
                  select user_id, 2, 1 from ins order by user_id
                  on conflict (user_id) do update
                    set last_seq = notification_cursor.last_seq + 2, unread = notification_cursor.unread + 1
                  returning user_id, last_seq, unread
                ), ev as (
                  insert into notification_event (user_id, seq, kind, notification_id, data)
                  select c.user_id, c.last_seq - 1, 'new_notification', i.id, null
                  from cur c join ins i on i.user_id = c.user_id
                  union all
                  select c.user_id, c.last_seq, 'unread_count_changed', null, jsonb_build_object('unreadCount', c.unread)
                  from cur c
                )
                select i.id, i.user_id, i.created_at, c.last_seq::text as seq, c.unread
                from ins i join cur c on c.user_id = i.user_id`,
          ),
        );
        const created: CreatedNotification[] = rows.map((r) => {
          const createdAt = iso(r.created_at);
          return {
            // The row as inserted: the template's fields (what the statement wrote) plus what the database chose.
            notification: {
              id: r.id,
              userId: r.user_id,
              type: t.type,
              title: t.title,
              content: t.content,
              metadata: t.metadata,
              read: false,
              createdAt,
              updatedAt: createdAt,
            },
            // Seq of new_notification; the statement wrote unread_count_changed at seq + 1 = last_seq.
            seq: Number(r.seq) - 1,
            unreadCount: Number(r.unread),
          };
        });
        if (created.length > 0)
          await writeEvents(
            domainEvents,
            ex,
            'notification.created',
            created.map((c) => c.notification),
          );
        return created;
      };
      // With a consumer of the event, its rows are queued in the same transaction as the notifications (a crash
      // between the two cannot lose an event); without one, the batch stays a single statement.
      const created = domainEvents?.wants('notification.created')
        ? await db.transaction((tx) => write(tx))
        : await write(db);
      let existing: Notification[] = [];
      if (sourceKey !== undefined && created.length < userIds.length) {
        const got = new Set(created.map((c) => c.notification.userId));
        const rest = userIds.filter((id) => !got.has(id));
        // Raw SQL: `= any(text[])` for a whole batch in one parameter.
        existing = rowsOf<NotificationRow>(
          await db.execute(
            sql`select ${COLUMNS} from notification
                  where source_key = ${sourceKey} and user_id = any(${textArray(rest)})`,
          ),
        ).map(toNotification);
      }
      return { created, existing };
    },

    /**
     * Queues the email of one notification for every user among `items` whose address is verified and whose
     * preferences allow `type`, in one INSERT … SELECT (the rendered mail is the same for every recipient and
     * is sent once). Returns the users it was queued for, including those whose email was already queued (the
     * outbox's per-notification dedupe key keeps a re-run single).
     */
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
            join "user" u on u.id = x.user_id and u.email_verified and not coalesce(u.banned, false)
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
                select id, false from "user" where id = ${userId}
                on conflict (user_id) do update set email_enabled = false, updated_at = now()
                returning user_id`
          : sql`insert into notification_preference (user_id, email_types)
                select id, array_remove(${defaults}, ${type}) from "user" where id = ${userId}
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
      if (cols.length === 0) return this.getPreferences(userId);
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
}

export type NotificationRepository = ReturnType<typeof createNotificationRepository>;
