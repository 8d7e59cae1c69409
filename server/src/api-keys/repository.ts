// Owns the api_key table's queries (infra/schema/api-keys.ts).
import { desc, eq, type SQL, sql } from 'drizzle-orm';
import { accountRelations } from '../auth/accounts.js';
import type { Db } from '../infra/db.js';
import { apiKey } from '../infra/schema/index.js';

export type ApiKeyRow = typeof apiKey.$inferSelect;

export async function insertApiKey(
  db: Db,
  values: Pick<ApiKeyRow, 'name' | 'scopes' | 'prefix' | 'keyHash' | 'createdBy' | 'expiresAt'>,
): Promise<ApiKeyRow> {
  const [row] = await db.insert(apiKey).values(values).returning();
  if (!row) throw new Error('api key insert returned no row');
  return row;
}

export function listApiKeys(db: Db): Promise<ApiKeyRow[]> {
  return db.select().from(apiKey).orderBy(desc(apiKey.createdAt), desc(apiKey.id));
}

/**
 * The key with this hash (one lookup through the unique index on key_hash) and whether its creator still holds
 * the authority it was made with: an administrator whose ban is not in force. A creator who was deleted (the
 * column is then null) holds none. Read in the same statement as the key, so a ban or demotion committed before
 * this query is always seen, on every instance.
 */
export function findByHash(db: Db, keyHash: string) {
  return findWithCreator(db, eq(apiKey.keyHash, keyHash));
}

/** The key with this id, read as findByHash reads it (the check again once a request's body has arrived). */
export function findById(db: Db, id: string) {
  return findWithCreator(db, eq(apiKey.id, id));
}

async function findWithCreator(
  db: Db,
  where: SQL,
): Promise<(ApiKeyRow & { creatorActive: boolean }) | undefined> {
  const [row] = await db
    .select({
      key: apiKey,
      creatorActive: sql<boolean>`exists (select 1 from ${accountRelations.activeAdmins} a where a.id = ${apiKey.createdBy})`,
    })
    .from(apiKey)
    .where(where)
    .limit(1);
  return row ? { ...row.key, creatorActive: row.creatorActive === true } : undefined;
}

export async function deleteApiKey(db: Db, id: string): Promise<boolean> {
  const rows = await db.delete(apiKey).where(eq(apiKey.id, id)).returning({ id: apiKey.id });
  return rows.length > 0;
}

/** Writes a batch of last-use times (one small update per key used since the last flush); never moves a time back. */
export async function touchApiKeys(db: Db, uses: Map<string, Date>): Promise<void> {
  for (const [id, at] of uses) {
    await db
      .update(apiKey)
      .set({ lastUsedAt: sql`greatest(coalesce(${apiKey.lastUsedAt}, ${at}), ${at})` })
      .where(eq(apiKey.id, id));
  }
}
