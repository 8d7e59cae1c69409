// Owns the reads of the per-user notification event log (notification_cursor, notification_event): the cursor a
// stream starts from, the newest seqs of many users, and the events after a cursor (SSE resume and gap repair).
// The log's writes happen in repository.ts, in the transaction of each change.
import { type SQL, sql } from 'drizzle-orm';
import { type Db, rowsOf, textArray } from '../infra/db.js';
import {
  type EventRow,
  N_COLUMNS,
  type NotificationRow,
  type SeqEvent,
  toNotification,
  type UserCursor,
} from './rows.js';

/**
 * The data key of a new_notification log row that stands for two events: itself at its seq and
 * unread_count_changed `{ unreadCount }` at seq + 1 (a broadcast writes one row per user instead of two; the seq
 * is still taken, so seqs stay contiguous). Rows written before it, and every other writer, log both rows.
 */
export const PAIRED_UNREAD_COUNT = 'pairedUnreadCount';

/** The unread count a paired row carries for seq + 1, or undefined for a row that stands for itself only. */
function pairedCount(r: EventRow): number | undefined {
  const v = r.kind === 'new_notification' ? r.data?.[PAIRED_UNREAD_COUNT] : undefined;
  return typeof v === 'number' ? v : undefined;
}

/** The event(s) one log row stands for. */
function eventsOf(r: EventRow): SeqEvent[] {
  const seq = Number(r.seq);
  let own: SeqEvent;
  if (r.nid === null) own = { seq, name: r.kind, data: r.data ?? {} };
  else if (r.id) own = { seq, name: r.kind, data: { notification: toNotification(r as NotificationRow) } };
  // Deleted since: its seq still carries an event (ids stay contiguous for clients that check), one that
  // says what is true now. Applying it is a no-op for a client that never saw the notification.
  else own = { seq, name: 'notification_deleted', data: { notificationId: r.nid } };
  const unreadCount = pairedCount(r);
  if (unreadCount === undefined) return [own];
  return [own, { seq: seq + 1, name: 'unread_count_changed', data: { unreadCount } }];
}

export function createEventLog(db: Db) {
  const exec = async <T>(query: SQL) => rowsOf<T>(await db.execute(query));
  return {
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
      // The row at afterSeq itself is read too: when it is a paired row, its second event (afterSeq + 1) is
      // after the cursor. `limit` rows after it are read besides, so a full page still returns ≥ limit events
      // (callers take fewer as the end of the log).
      // Raw SQL: left join onto the current row with seqs as text (int8 precision).
      const rows = await exec<EventRow>(
        sql`select e.seq::text as seq, e.kind, e.data, e.notification_id as nid, ${N_COLUMNS}
            from notification_event e left join notification n on n.id = e.notification_id
            where e.user_id = ${userId} and e.seq >= ${afterSeq}
            order by e.seq asc limit ${limit + 1}`,
      );
      const page = rows.length > 0 && Number(rows[0]?.seq) === afterSeq ? rows : rows.slice(0, limit);
      return page.flatMap(eventsOf).filter((e) => e.seq > afterSeq);
    },
  };
}
