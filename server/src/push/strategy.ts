// Owns the `push` delivery strategy (CONTRACT §4, §11): for a batch of notifications, queue one message per
// subscribed browser of every user whose preferences allow it (pushEnabled and the type in pushTypes), in ONE
// INSERT … SELECT per batch however many users and browsers (a 500-user broadcast batch is one statement).
// Sending is the worker's job (worker.ts); queued counts as delivered, like the email strategy.
import { sql } from 'drizzle-orm';
import { accountRelations } from '../auth/accounts.js';
import { type Db, rowsOf, textArray } from '../infra/db.js';
import type { DeliveryItem, DeliveryStrategy } from '../notifications/delivery.js';
import { notificationRelations } from '../notifications/relations.js';

export function pushDeliveryStrategy(deps: { db: Db; kick: () => void }): DeliveryStrategy {
  return {
    name: 'push',
    async deliver(items: DeliveryItem[]) {
      const delivered = new Set<string>();
      // Grouped by type (a broadcast batch has one): the preference check is per type.
      const byType = new Map<string, DeliveryItem[]>();
      for (const item of items) {
        const group = byType.get(item.type);
        if (group) group.push(item);
        else byType.set(item.type, [item]);
      }
      let queued = 0;
      for (const [type, group] of byType) {
        // Raw SQL: unnest of two parallel arrays joined to the users who want the type pushed (the preferences are
        // notifications/'s, through notificationRelations) and to subscriptions, the queue insert as a
        // CTE, and the users with at least one live subscription returned whether or not their rows already
        // existed (the unique (notification, subscription) index keeps a re-run single).
        const rows = rowsOf<{ user_id: string; queued: number }>(
          await deps.db.execute(sql`
            with t as (
              select x.user_id, x.nid
              from unnest(${textArray(group.map((i) => i.userId))}, ${textArray(group.map((i) => i.notificationId))})
                as x(user_id, nid)
              join ${notificationRelations.pushRecipients(type)} p on p.user_id = x.user_id
              join ${accountRelations.unbanned} u on u.id = x.user_id
            ), s as (
              select t.user_id, t.nid::uuid as nid, s.id as sid, s.push_service
              from t join push_subscription s on s.user_id = t.user_id
              where s.expiration_time is null or s.expiration_time > now()
            ), ins as (
              insert into push_delivery (notification_id, subscription_id, user_id, push_service)
              select nid, sid, user_id, push_service from s
              on conflict (notification_id, subscription_id) do nothing
              returning 1
            )
            select distinct s.user_id, (select count(*)::int from ins) as queued from s`),
        );
        for (const r of rows) delivered.add(r.user_id);
        queued += Number(rows[0]?.queued ?? 0);
      }
      if (queued > 0) deps.kick();
      return delivered;
    },
  };
}
