// The event log's paired rows (event-log.ts PAIRED_UNREAD_COUNT): a broadcast writes ONE new_notification row per
// user that stands for its seq and for unread_count_changed at seq + 1. A reader must see exactly the events the
// two-row form gave: both after a cursor before the pair, only the count after a cursor between them, pages that
// stay contiguous whatever their size, and rows written in the old two-row form read as before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNotificationRepository } from '../../src/notifications/repository.js';
import { readReplay } from '../../src/notifications/stream-hub/resume.js';
import { createMigratedDatabase } from '../helpers/db.js';

let db: Awaited<ReturnType<typeof createMigratedDatabase>>;
let pool: Awaited<ReturnType<typeof createMigratedDatabase>>['pool'];
let repo: ReturnType<typeof createNotificationRepository>;

const template = (title: string) => ({ type: 'info' as const, title, content: 'c', metadata: {} });
const addUser = (id: string) => db.insertUser(id);

beforeAll(async () => {
  db = await createMigratedDatabase();
  pool = db.pool;
  repo = createNotificationRepository(db.database.db);
});

afterAll(async () => {
  await db?.close();
});

describe('paired event-log rows', () => {
  it('one row per broadcast user, replayed as new_notification then unread_count_changed', async () => {
    await addUser('p1');
    const { created } = await repo.insertForUsers(['p1'], template('first'));
    const id = created[0]?.notification.id;
    expect(created[0]?.seq).toBe(1);
    const { rows } = await pool.query<{ n: number }>(
      `select count(*)::int as n from notification_event where user_id = 'p1'`,
    );
    expect(rows[0]?.n).toBe(1);

    const all = await repo.eventsAfter('p1', 0, 500);
    expect(all.map((e) => [e.seq, e.name])).toEqual([
      [1, 'new_notification'],
      [2, 'unread_count_changed'],
    ]);
    expect(all[0]?.data.notification).toMatchObject({ id });
    expect(all[0]?.data).not.toHaveProperty('pairedUnreadCount');
    expect(all[1]?.data).toEqual({ unreadCount: 1 });
    // A client that saw the new_notification (Last-Event-ID 1) gets only the count.
    expect((await repo.eventsAfter('p1', 1, 500)).map((e) => [e.seq, e.name])).toEqual([
      [2, 'unread_count_changed'],
    ]);
    expect(await repo.eventsAfter('p1', 2, 500)).toEqual([]);
    expect(await repo.cursor('p1')).toEqual({ lastSeq: 2, unread: 1, oldestSeq: 1 });
  });

  it('pages of any size stay contiguous through paired, two-row and single rows', async () => {
    await addUser('p2');
    await repo.insertForUsers(['p2'], template('a')); // seqs 1, 2 (one row)
    const b = await repo.insertForUsers(['p2'], template('b')); // seqs 3, 4 (one row)
    const bId = b.created[0]?.notification.id as string;
    await repo.setRead('p2', bId, true); // seqs 5, 6 (two rows)
    // The two-row form written before paired rows existed: seq 7 new_notification, seq 8 its count.
    await pool.query(`update notification_cursor set last_seq = 8, unread = 2 where user_id = 'p2'`);
    const legacy = await pool.query<{ id: string }>(
      `insert into notification (user_id, type, title, content) values ('p2', 'info', 'legacy', 'c') returning id`,
    );
    await pool.query(
      `insert into notification_event (user_id, seq, kind, notification_id, data) values
         ('p2', 7, 'new_notification', $1, null),
         ('p2', 8, 'unread_count_changed', null, '{"unreadCount":2}'::jsonb)`,
      [legacy.rows[0]?.id],
    );
    await repo.insertForUsers(['p2'], template('c')); // seqs 9, 10 (one row)
    await repo.remove('p2', bId); // seq 11 (deleted read row: no count change)

    const expected = [
      [1, 'new_notification'],
      [2, 'unread_count_changed'],
      // b was deleted since: its seq replays as what is true now.
      [3, 'notification_deleted'],
      [4, 'unread_count_changed'],
      [5, 'notification_deleted'],
      [6, 'unread_count_changed'],
      [7, 'new_notification'],
      [8, 'unread_count_changed'],
      [9, 'new_notification'],
      [10, 'unread_count_changed'],
      [11, 'notification_deleted'],
    ];
    expect((await repo.eventsAfter('p2', 0, 500)).map((e) => [e.seq, e.name])).toEqual(expected);
    // Every starting cursor, every page size: the walk a resume and a gap repair do gives exactly the rest.
    for (let from = 0; from <= 11; from++) {
      for (const page of [1, 2, 3]) {
        const seen: number[] = [];
        let after = from;
        for (;;) {
          const events = await repo.eventsAfter('p2', after, page);
          for (const e of events) {
            seen.push(e.seq);
            after = e.seq;
          }
          if (events.length < page) break;
        }
        expect(seen, `from ${from}, page ${page}`).toEqual(
          expected.map(([seq]) => seq as number).filter((seq) => seq > from),
        );
      }
    }
    const replay = await readReplay(repo, 'p2', 1, 11);
    expect(replay.map((r) => r.seq)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(replay[0]?.body).toContain('"unreadCount":1');
  });
});
