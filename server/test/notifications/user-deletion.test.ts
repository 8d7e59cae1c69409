// A deleted user's event log goes with them (migration 0017): notification_event has no foreign key to "user" (its
// per-row check was a sixth of a broadcast batch), so a statement trigger on "user" deletes the rows instead. Also
// the race the design relies on: a change that appends events while the user is being deleted holds the cursor row,
// the deletion waits for it, and the events it committed are deleted too (none is left behind).
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNotificationRepository } from '../../src/notifications/repository.js';
import { createMigratedDatabase } from '../helpers/db.js';

let db: Awaited<ReturnType<typeof createMigratedDatabase>>;
let pool: Awaited<ReturnType<typeof createMigratedDatabase>>['pool'];
let repo: ReturnType<typeof createNotificationRepository>;

const TEMPLATE = { type: 'info' as const, title: 'Hello', content: 'World', metadata: {} };

async function addUsers(...ids: string[]) {
  for (const id of ids) await db.insertUser(id);
}

async function eventRows(userId: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    'select count(*)::int as n from notification_event where user_id = $1',
    [userId],
  );
  return rows[0]?.n ?? -1;
}

beforeAll(async () => {
  db = await createMigratedDatabase(3);
  pool = db.pool;
  repo = createNotificationRepository(db.database.db);
});

afterAll(async () => {
  await db?.close();
});

describe('deleting a user', () => {
  it('deletes their event log and cursor, and leaves other users’ rows alone', async () => {
    await addUsers('gone-1', 'gone-2', 'stays');
    await repo.insertForUsers(['gone-1', 'gone-2', 'stays'], TEMPLATE);
    const [first] = (await repo.list('gone-1', { page: 1, limit: 20, filter: 'all' })).rows;
    if (!first) throw new Error('no notification created');
    await repo.setRead('gone-1', first.id, true);
    // A broadcast logs one row per user (a paired new_notification, event-log.ts); marking read logs two.
    expect(await eventRows('gone-1')).toBe(3);
    expect(await eventRows('gone-2')).toBe(1);
    expect(await eventRows('stays')).toBe(1);

    // One statement deleting two users: the statement trigger sees both in its transition table.
    await pool.query(`delete from "user" where id in ('gone-1', 'gone-2')`);
    expect(await eventRows('gone-1')).toBe(0);
    expect(await eventRows('gone-2')).toBe(0);
    expect(await eventRows('stays')).toBe(1);
    const { rows } = await pool.query<{ n: number }>(
      `select count(*)::int as n from notification_cursor where user_id in ('gone-1', 'gone-2')`,
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('waits for a change appending events and deletes what it committed', async () => {
    await addUsers('racing');
    await repo.insertForUsers(['racing'], TEMPLATE);
    const [n] = (await repo.list('racing', { page: 1, limit: 20, filter: 'all' })).rows;
    if (!n) throw new Error('no notification created');

    // A transaction of the repository's shape: the cursor bump first (its row lock), then the event row. It stays
    // open while another connection deletes the user.
    const writer = await pool.connect();
    const deleter = await pool.connect();
    try {
      await writer.query('begin');
      await writer.query(
        `update notification_cursor set last_seq = last_seq + 1 where user_id = 'racing' returning last_seq`,
      );
      await writer.query(
        `insert into notification_event (user_id, seq, kind, data)
           select user_id, last_seq, 'unread_count_changed', '{"unreadCount":1}'::jsonb
           from notification_cursor where user_id = 'racing'`,
      );
      let deleted = false;
      const deletion = deleter.query(`delete from "user" where id = 'racing'`).then(() => {
        deleted = true;
      });
      // The deletion cascades to the cursor row the writer holds: it must wait for the commit.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(deleted).toBe(false);
      await writer.query('commit');
      await deletion;
      expect(deleted).toBe(true);
    } finally {
      writer.release();
      deleter.release();
    }
    expect(await eventRows('racing')).toBe(0);
    const left = await db.database.db.execute(
      sql`select count(*)::int as n from notification where user_id = 'racing'`,
    );
    expect(JSON.stringify(left)).toContain('"n":0');
  });
});
