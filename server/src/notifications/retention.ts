// Owns the notification tables' housekeeping (notification, notification_event, notification_cursor): a task of
// the shared scheduler (infra/housekeeping.ts), run with the other owners' tasks under one lock
// (docs/architecture.md, "Retention").
import { sql } from 'drizzle-orm';
import type { Config } from '../config.js';
import { jsonb, rowsOf } from '../infra/db.js';
import type { HousekeepingTask } from '../infra/housekeeping.js';
import { REPLAY_MAX } from './stream-hub/resume.js';
import type { UnreadCache } from './unread-cache.js';

/**
 * Deletes notifications past RETENTION_MAX_AGE_DAYS or beyond RETENTION_MAX_PER_USER per user, and the event log
 * beyond what a resume can replay; after commit, invalidates the cached counts and first pages of the users whose
 * rows went.
 */
export function notificationRetentionTask(
  config: Pick<Config, 'RETENTION_MAX_AGE_DAYS' | 'RETENTION_MAX_PER_USER'>,
  unread: Pick<UnreadCache, 'invalidate'>,
): HousekeepingTask {
  const maxAgeDays = config.RETENTION_MAX_AGE_DAYS;
  const maxPerUser = config.RETENTION_MAX_PER_USER;
  return {
    owner: 'notifications',
    async run(tx) {
      const expired = rowsOf<{ user_id: string; n: number; u: number }>(
        await tx.execute(sql`
        with d as (delete from notification
                   where created_at < now() - make_interval(days => ${maxAgeDays}::int)
                   returning user_id, read)
        select user_id, count(*)::int as n, count(*) filter (where not read)::int as u from d group by user_id`),
      );
      // Only users above the cap are visited; for each, the (cap+1)-th newest row found through the
      // (user_id, created_at desc, id desc) index marks where deletion starts.
      const overflow = rowsOf<{ user_id: string; n: number; u: number }>(
        await tx.execute(sql`
        with heavy as (
          select user_id from notification group by user_id having count(*) > ${maxPerUser}::int
        ), cut as (
          select h.user_id, c.created_at, c.id from heavy h
          cross join lateral (
            select created_at, id from notification n
            where n.user_id = h.user_id
            order by created_at desc, id desc offset ${maxPerUser}::int limit 1
          ) c
        ), d as (
          delete from notification n using cut
          where n.user_id = cut.user_id and (n.created_at, n.id) <= (cut.created_at, cut.id)
          returning n.user_id, n.read
        )
        select user_id, count(*)::int as n, count(*) filter (where not read)::int as u from d group by user_id`),
      );
      // Deleted unread rows lower the count: the cursor moves by one unread_count_changed event per user, so
      // live streams and resuming clients learn it like any other change (locked in user-id order, as
      // broadcasts do, so the two cannot deadlock).
      const unreadDrop = new Map<string, number>();
      for (const r of [...expired, ...overflow]) {
        if (Number(r.u) > 0) unreadDrop.set(r.user_id, (unreadDrop.get(r.user_id) ?? 0) + Number(r.u));
      }
      if (unreadDrop.size > 0) {
        const drops = jsonb([...unreadDrop].map(([user_id, u]) => ({ user_id, u })));
        await tx.execute(sql`
        with c as (
          insert into notification_cursor (user_id, last_seq, unread)
          select user_id, 1, 0 from jsonb_to_recordset(${drops}) as x(user_id text, u int) order by user_id
          on conflict (user_id) do update
            set last_seq = notification_cursor.last_seq + 1,
                unread = greatest(notification_cursor.unread - (
                  select x.u from jsonb_to_recordset(${drops}) as x(user_id text, u int)
                  where x.user_id = excluded.user_id), 0)
          returning user_id, last_seq, unread
        )
        insert into notification_event (user_id, seq, kind, data)
        select user_id, last_seq, 'unread_count_changed', jsonb_build_object('unreadCount', unread) from c`);
      }
      // The event log keeps what a resume can use: the retention window and at most REPLAY_MAX per user.
      const [events] = rowsOf<{ n: number }>(
        await tx.execute(sql`
        with d as (
          delete from notification_event e using notification_cursor c
          where e.user_id = c.user_id
            and (e.seq <= c.last_seq - ${REPLAY_MAX}::int
                 or e.created_at < now() - make_interval(days => ${maxAgeDays}::int))
          returning 1)
        select count(*)::int as n from d`),
      );
      const touched = new Set<string>();
      // Any deleted row changes the user's cached first page (read rows too), not only their unread count.
      for (const r of [...expired, ...overflow]) if (Number(r.n) > 0) touched.add(r.user_id);
      return {
        counts: {
          expiredDeleted: expired.reduce((sum, r) => sum + Number(r.n), 0),
          overflowDeleted: overflow.reduce((sum, r) => sum + Number(r.n), 0),
          eventsDeleted: Number(events?.n ?? 0),
        },
        afterCommit: () => unread.invalidate([...touched]),
      };
    },
  };
}
