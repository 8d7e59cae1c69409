// Owns what other features' bulk statements may know of the notification tables (notification,
// notification_preference), in the style of auth/accounts.ts's accountRelations: push's queueing and claim, the
// email digest's load. They stay one statement per batch, while the tables' columns and the preference rules
// (the default type sets, push off and email on without a preferences row) stay here. No file outside
// notifications/ names these tables (test/architecture/owners.test.ts).
import { type SQL, sql } from 'drizzle-orm';
import { textArray } from '../infra/db.js';
import { DEFAULT_EMAIL_TYPES, DEFAULT_PUSH_TYPES } from './schemas.js';

/**
 * The notification tables as relations for other features' statements. Each is a parenthesised subquery with
 * exactly the columns its comment names, joined as `join ${…} p on p.user_id = …`: PostgreSQL inlines such a
 * subquery (the plan is the join on the table, its WHERE among the join's conditions), so the statement is the
 * one it was when it named the table.
 */
export const notificationRelations = {
  /**
   * `(user_id)`: users whose preferences let a notification of `type` be pushed: pushEnabled (a user without a
   * preferences row has push off, so is not here) and `type` in pushTypes (the default set when unset).
   */
  pushRecipients: (type: string): SQL =>
    sql`(select user_id from notification_preference
         where push_enabled and ${type} = any(coalesce(push_types, ${textArray(DEFAULT_PUSH_TYPES)})))`,
  /**
   * `(id, type, title, content, metadata, created_at, read)`: every notification as it is now (a push is sent
   * with the current content, and a notification read or deleted meanwhile is not sent). Left-join it: a deleted
   * notification has no row.
   */
  contents: sql`(select id, type, title, content, metadata, created_at, read from notification)`,
};

/** One entry of DigestContent's `items` (a JSON object, `createdAt` as PostgreSQL writes a timestamptz in JSON). */
export interface DigestItem {
  type: string;
  title: string;
  content: string;
  createdAt: string;
}

export interface DigestContent {
  /** FROM items to put right after the FROM item that has the columns the function was given. */
  joins: SQL;
  /** boolean: the user's emailEnabled (true without a preferences row). */
  emailEnabled: SQL;
  /** int: how many of the window's notifications are unread and of a type the user gets by email. */
  total: SQL;
  /** json: the newest `maxItems` of them, newest first, as DigestItem objects (`[]` when none). */
  items: SQL;
}

/**
 * What an email digest reports of one user's window [windowStart, windowEnd), for a statement over many such rows
 * (email/digest.ts loads a claimed batch in one statement): the notifications still unread whose type the user
 * gets by email (emailTypes, the default set when unset). The arguments name the outer row's columns
 * (e.g. sql`d.user_id`); `joins` uses the aliases `dp`, `dc`, `di` (and `dn`, `ds` inside), so the outer
 * statement must not use them.
 */
export function digestContent(
  at: { userId: SQL; windowStart: SQL; windowEnd: SQL },
  maxItems: number,
): DigestContent {
  const emailed = sql`dn.type = any(coalesce(dp.email_types, ${textArray(DEFAULT_EMAIL_TYPES)}))`;
  const inWindow = sql`dn.user_id = ${at.userId} and not dn.read
            and dn.created_at >= ${at.windowStart} and dn.created_at < ${at.windowEnd}`;
  return {
    joins: sql`
        left join notification_preference dp on dp.user_id = ${at.userId}
        cross join lateral (
          select count(*)::int as total from notification dn
          where ${inWindow}
            and ${emailed}) dc
        cross join lateral (
          select coalesce(json_agg(json_build_object('type', ds.type, 'title', ds.title, 'content', ds.content,
                   'createdAt', ds.created_at) order by ds.created_at desc, ds.id desc), '[]'::json) as items
          from (
            select dn.id, dn.type, dn.title, dn.content, dn.created_at from notification dn
            where ${inWindow}
              and ${emailed}
            order by dn.created_at desc, dn.id desc
            limit ${maxItems}) ds) di`,
    emailEnabled: sql`coalesce(dp.email_enabled, true)`,
    total: sql`dc.total`,
    items: sql`di.items`,
  };
}
