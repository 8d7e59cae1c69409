// Owns every SQL statement on the notification table and the writes of the per-user event log (the log's reads are
// event-log.ts, the preferences preferences-repository.ts; this factory composes all three). Plain statements use
// Drizzle's builder; raw SQL stays where it earns its place, each with its reason.
import { and, eq, ne, type SQL, sql } from 'drizzle-orm';
import { accountRelations } from '../auth/accounts.js';
import type { EventOutbox } from '../events/outbox.js';
import { type Db, jsonb, rowsOf, textArray } from '../infra/db.js';
import { preparedRows } from '../infra/prepared-statements.js';
import { notification, notificationCursor } from '../infra/schema/index.js';
import { createListPages, type ListPagesOptions } from './list-pages.js';

export * from './rows.js';

import { createEventLog, PAIRED_UNREAD_COUNT } from './event-log.js';
import { createPreferencesRepository } from './preferences-repository.js';
import {
  iso,
  type LogEntry,
  type LoggedEventKind,
  NOTIFICATION_COLUMNS,
  type NotificationRow,
  type SeqEvent,
  toNotification,
} from './rows.js';
import { type Counts, NOTIFICATION_TYPES, type Notification, type NotificationType } from './schemas.js';

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

export interface CreatedNotification {
  notification: Notification;
  /** Seq of its new_notification event; unread_count_changed follows at seq + 1. */
  seq: number;
  unreadCount: number;
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
        from jsonb_to_recordset(${jsonb(rows)})
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

export type NotificationRepositoryOptions = ListPagesOptions;

export function createNotificationRepository(
  db: Db,
  domainEvents?: Pick<EventOutbox, 'write' | 'wants'>,
  options: NotificationRepositoryOptions = {},
) {
  const _exec = async <T>(query: SQL) => rowsOf<T>(await db.execute(query));
  const pages = createListPages(db, options);

  return {
    // The event log's reads (cursor, resume) and the preferences have their own modules; one repository for callers.
    ...createEventLog(db),
    ...createPreferencesRepository(db),
    ...pages,

    async counts(userId: string, via: Executor = db): Promise<Counts> {
      const perType = sql.join(
        NOTIFICATION_TYPES.map((t) => sql`count(*) filter (where type = ${t})::int as ${sql.identifier(t)}`),
        sql`, `,
      );
      // Raw SQL: count(*) filter (…) per status and type in one scan.
      const [row] = await preparedRows<Record<string, number>>(
        via,
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

    /**
     * Creates the same notification for many users in ONE statement (docs/architecture.md "Broadcast at
     * scale"): the notification rows, each user's cursor bump (two seqs: new_notification at seq − 1,
     * unread_count_changed at seq) and ONE event-log row standing for both (event-log.ts PAIRED_UNREAD_COUNT:
     * half the log's rows and index entries of a broadcast) are data-modifying CTEs of a single INSERT, so a batch costs one
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
                  select u.id, ${t.type}, ${t.title}, ${t.content}, ${jsonb(t.metadata)}, ${sourceKey ?? null}
                  from unnest(${textArray(userIds)}) with ordinality as x(id, ord)
                  join ${accountRelations.ids} u on u.id = x.id
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
                  select c.user_id, c.last_seq - 1, 'new_notification', i.id,
                         jsonb_build_object(${PAIRED_UNREAD_COUNT}::text, c.unread)
                  from cur c join ins i on i.user_id = c.user_id
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
            // Seq of new_notification; unread_count_changed is at seq + 1 = last_seq (replayed from the same row).
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
            sql`select ${NOTIFICATION_COLUMNS} from notification
                  where source_key = ${sourceKey} and user_id = any(${textArray(rest)})`,
          ),
        ).map(toNotification);
      }
      return { created, existing };
    },
  };
}

export type NotificationRepository = ReturnType<typeof createNotificationRepository>;
