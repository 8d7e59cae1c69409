// Owns the api_key table's queries (infra/schema/api-keys.ts).
import { desc, eq, sql } from 'drizzle-orm';
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

/** The key with this hash: one lookup through the unique index on key_hash. */
export async function findByHash(db: Db, keyHash: string): Promise<ApiKeyRow | undefined> {
  const [row] = await db.select().from(apiKey).where(eq(apiKey.keyHash, keyHash)).limit(1);
  return row;
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
