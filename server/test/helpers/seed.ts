// Direct inserts for tests that need many rows or controlled timestamps.
import { sql } from 'drizzle-orm';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';

export interface SeedRow {
  type?: string;
  title?: string;
  content?: string;
  read?: boolean;
  createdAt?: Date;
  metadata?: Record<string, unknown>;
}

export async function seed(app: App, userId: string, rows: SeedRow[]): Promise<string[]> {
  if (rows.length === 0) return [];
  const values = sql.join(
    rows.map(
      (r, i) =>
        sql`(${userId}, ${r.type ?? 'info'}, ${r.title ?? `title ${i}`}, ${r.content ?? `content ${i}`},
             ${JSON.stringify(r.metadata ?? {})}::jsonb, ${r.read ?? false},
             ${(r.createdAt ?? new Date(Date.UTC(2030, 0, 1) + i * 1000)).toISOString()}::timestamptz,
             ${(r.createdAt ?? new Date(Date.UTC(2030, 0, 1) + i * 1000)).toISOString()}::timestamptz)`,
    ),
    sql`, `,
  );
  const out = rowsOf<{ id: string }>(
    await app.ctx.database.db.execute(
      sql`insert into notification (user_id, type, title, content, metadata, read, created_at, updated_at)
          values ${values} returning id`,
    ),
  );
  // Rows inserted behind the service's back: keep the cursor's unread count exact, as a migration would.
  await app.ctx.database.db.execute(
    sql`insert into notification_cursor (user_id, unread)
        values (${userId}, (select count(*) from notification where user_id = ${userId} and not read))
        on conflict (user_id) do update set unread = excluded.unread`,
  );
  await app.notifications.forgetCached([userId]);
  return out.map((r) => r.id);
}

export async function dbUnread(app: App, userId: string): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await app.ctx.database.db.execute(
      sql`select count(*)::int as n from notification where user_id = ${userId} and read = false`,
    ),
  );
  return Number(row?.n ?? 0);
}
