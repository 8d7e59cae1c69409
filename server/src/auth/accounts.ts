// Owns reads of the accounts' `user` table for other features (admin broadcast): find by ids or emails, walk
// every user in batches, and the ban rule — the one place that says when a ban applies.
import { type SQL, sql } from 'drizzle-orm';
import { type Db, rowsOf, textArray } from '../infra/db.js';

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
