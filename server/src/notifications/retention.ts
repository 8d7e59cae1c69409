// Owns housekeeping, one instance at a time under an advisory lock (docs/architecture.md, "Retention").
import { sql } from 'drizzle-orm';
import type { Config } from '../config.js';
import { type Database, rowsOf } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { REPLAY_MAX } from './stream-hub.js';
import { createUnreadCache, type UnreadCache } from './unread-cache.js';

// Arbitrary but fixed; distinct from the migration lock.
const RETENTION_LOCK_KEY = 727_001_043;
// Finished email and webhook queue rows (their delivery log).
const FINISHED_EMAIL_KEEP_DAYS = 7;
const IDEMPOTENCY_KEEP_HOURS = 24;

export interface RetentionResult {
  /** False when another instance held the lock and this run did nothing. */
  ran: boolean;
  expiredDeleted: number;
  overflowDeleted: number;
  /** Event-log rows beyond what a resume can replay. */
  eventsDeleted: number;
  emailsDeleted: number;
  /** Delivered or given-up webhook deliveries older than 7 days (their log). */
  webhookDeliveriesDeleted: number;
  idempotencyKeysDeleted: number;
}

export interface RetentionContext {
  config: Pick<Config, 'RETENTION_MAX_AGE_DAYS' | 'RETENTION_MAX_PER_USER'>;
  database: Pick<Database, 'db'>;
  store: Store;
  logger: Logger;
}

/** One retention run (also the CLI entry point). Invalidates the unread counts of affected users. */
export async function runRetention(
  ctx: RetentionContext,
  unreadCache?: UnreadCache,
): Promise<RetentionResult> {
  const { db } = ctx.database;
  const maxAgeDays = ctx.config.RETENTION_MAX_AGE_DAYS;
  const maxPerUser = ctx.config.RETENTION_MAX_PER_USER;
  const result = await db.transaction(async (tx) => {
    const [lock] = rowsOf<{ locked: boolean }>(
      await tx.execute(sql`select pg_try_advisory_xact_lock(${RETENTION_LOCK_KEY}) as locked`),
    );
    if (!lock?.locked) return null;
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
      const drops = JSON.stringify([...unreadDrop].map(([user_id, u]) => ({ user_id, u })));
      await tx.execute(sql`
        with c as (
          insert into notification_cursor (user_id, last_seq, unread)
          select user_id, 1, 0 from jsonb_to_recordset(${drops}::jsonb) as x(user_id text, u int) order by user_id
          on conflict (user_id) do update
            set last_seq = notification_cursor.last_seq + 1,
                unread = greatest(notification_cursor.unread - (
                  select x.u from jsonb_to_recordset(${drops}::jsonb) as x(user_id text, u int)
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
    const [emails] = rowsOf<{ n: number }>(
      await tx.execute(sql`
        with d as (delete from email_outbox where status in ('sent', 'failed')
                   and created_at < now() - make_interval(days => ${FINISHED_EMAIL_KEEP_DAYS}::int) returning 1)
        select count(*)::int as n from d`),
    );
    const [hooks] = rowsOf<{ n: number }>(
      await tx.execute(sql`
        with d as (delete from webhook_delivery where status <> 'pending'
                   and created_at < now() - make_interval(days => ${FINISHED_EMAIL_KEEP_DAYS}::int) returning 1)
        select count(*)::int as n from d`),
    );
    const [keys] = rowsOf<{ n: number }>(
      await tx.execute(sql`
        with d as (delete from idempotency_key
                   where created_at < now() - make_interval(hours => ${IDEMPOTENCY_KEEP_HOURS}::int) returning 1)
        select count(*)::int as n from d`),
    );
    const touched = new Set<string>();
    // Any deleted row changes the user's cached first page (read rows too), not only their unread count.
    for (const r of [...expired, ...overflow]) if (Number(r.n) > 0) touched.add(r.user_id);
    return {
      touched: [...touched],
      expiredDeleted: expired.reduce((s, r) => s + Number(r.n), 0),
      eventsDeleted: Number(events?.n ?? 0),
      overflowDeleted: overflow.reduce((s, r) => s + Number(r.n), 0),
      emailsDeleted: Number(emails?.n ?? 0),
      webhookDeliveriesDeleted: Number(hooks?.n ?? 0),
      idempotencyKeysDeleted: Number(keys?.n ?? 0),
    };
  });
  if (!result)
    return {
      ran: false,
      expiredDeleted: 0,
      overflowDeleted: 0,
      eventsDeleted: 0,
      emailsDeleted: 0,
      webhookDeliveriesDeleted: 0,
      idempotencyKeysDeleted: 0,
    };
  // After commit: deleted rows change cached unread counts and first pages.
  const cache =
    unreadCache ?? createUnreadCache({ store: ctx.store, logger: ctx.logger, countFromDb: async () => 0 });
  await cache.invalidate(result.touched);
  if (!unreadCache) cache.close();
  const { touched: _t, ...counts } = result;
  ctx.logger.info(counts, 'notification retention run');
  return { ran: true, ...counts };
}

/** Runs retention every RETENTION_INTERVAL_MS on this instance; the lock keeps runs single cluster-wide. */
export function startRetentionJob(ctx: RetentionContext, intervalMs: number, unreadCache: UnreadCache) {
  let running: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    if (running) return;
    running = runRetention(ctx, unreadCache)
      .catch((err: unknown) => ctx.logger.warn({ err }, 'notification retention failed'))
      .finally(() => {
        running = undefined;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
