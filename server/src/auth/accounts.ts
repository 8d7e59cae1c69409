// Owns what other features may know of the accounts' `user` table: find by ids or emails, walk every user in
// batches, count them, grant the admin role (create-admin), the ban rule (the one place that says when a ban
// applies), and the accounts as SQL relations that other features' bulk statements join (accountRelations). No
// file outside auth/ names the table or its columns (test/architecture/owners.test.ts).
import { eq, type SQL, sql } from 'drizzle-orm';
import { type Db, rowsOf, textArray } from '../infra/db.js';
import { user as userTable } from '../infra/schema/index.js';

export interface AccountRow {
  id: string;
  email: string;
  /** The ban applies now (see isBanActive). */
  banned: boolean;
}

/** A ban with an expiry in the past no longer applies (better-auth lifts it at the next sign-in). */
export function isBanActive(u: { banned?: boolean | null; banExpires?: string | Date | null }): boolean {
  return Boolean(u.banned) && !(u.banExpires && new Date(u.banExpires).getTime() < Date.now());
}

/** isBanActive as SQL over the `user` table's columns. */
const BAN_ACTIVE: SQL = sql.raw(`(coalesce(banned, false) and (ban_expires is null or ban_expires > now()))`);

/**
 * The accounts as relations for other features' statements. Each is a parenthesised subquery with exactly the
 * columns its comment names, joined as `join ${accountRelations.ids} u on u.id = …`: PostgreSQL inlines such a
 * subquery (the plan is the join on the table), so a bulk statement stays one round trip while the accounts'
 * columns and rules stay here.
 */
export const accountRelations = {
  /** `(id)`: every account. Joining it skips ids whose account no longer exists. */
  ids: sql`(select id from "user")`,
  /**
   * `(id, email, locale)`: accounts a notification may be emailed to when it is created — a verified address (an
   * unverified one was typed by whoever signed up, not necessarily its owner) and no ban in force (isBanActive:
   * a temporary ban whose expiry has passed no longer counts, as for broadcasts, digests and API keys).
   */
  notificationEmail: sql`(select id, email, locale from "user" where email_verified and not ${BAN_ACTIVE})`,
  /** `(id, email, locale, mailable)`: every account, `mailable` when its address is verified and no ban applies. */
  mail: sql`(select id, email, locale, (email_verified and not ${BAN_ACTIVE}) as mailable from "user")`,
  /** `(id)`: administrators whose ban (if any) is not in force: the authority an API key's creator must hold. */
  activeAdmins: sql`(select id from "user" where role = 'admin' and not ${BAN_ACTIVE})`,
  /**
   * `(id)`: accounts with no ban in force: the members chat notifies of a direct message, and who a notification
   * may be pushed to (queued, and again when sent, so a ban stops what was queued before it too).
   */
  unbanned: sql`(select id from "user" where not ${BAN_ACTIVE})`,
  /** `(id, name, username)`: every account's public profile (chat shows members by name). */
  profiles: sql`(select id, name, username from "user")`,
  /**
   * `(id, name, username)`: accounts with no ban in force (chat's audience of `general`, who may be invited, and
   * who chat notifies of a mention; the same rule as isBanActive everywhere else).
   */
  unbannedProfiles: sql`(select id, name, username from "user" where not ${BAN_ACTIVE})`,
};

/** Gives an existing account the admin role (the create-admin command). */
export async function grantAdminRole(db: Db, id: string): Promise<void> {
  await db.update(userTable).set({ role: 'admin' }).where(eq(userTable.id, id));
}

/** Users whose id is one of `ids` or whose email matches one of `emails` case-insensitively. */
export async function findAccounts(db: Db, ids: string[], emails: string[]): Promise<AccountRow[]> {
  const lowered = [...new Set(emails.map((e) => e.toLowerCase()))];
  return rowsOf<AccountRow>(
    await db.execute(
      sql`select id, email, ${BAN_ACTIVE} as banned from "user"
          where id = any(${textArray(ids)}) or lower(email) = any(${textArray(lowered)})`,
    ),
  );
}

/** Every user, `batchSize` at a time, by keyset walk over the primary key (constant cost per page). */
export async function* accountBatches(db: Db, batchSize: number): AsyncGenerator<AccountRow[]> {
  let after = '';
  for (;;) {
    const rows = rowsOf<AccountRow>(
      await db.execute(
        sql`select id, email, ${BAN_ACTIVE} as banned from "user" where id > ${after} order by id limit ${batchSize}`,
      ),
    );
    if (rows.length === 0) return;
    after = rows[rows.length - 1]?.id ?? after;
    yield rows;
    if (rows.length < batchSize) return;
  }
}

/** How many accounts exist (the audience of a `scope: "all"` send). */
export async function countAccounts(db: Db): Promise<number> {
  const [row] = rowsOf<{ n: string | number }>(await db.execute(sql`select count(*) as n from "user"`));
  return Number(row?.n ?? 0);
}
