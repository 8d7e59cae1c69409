// A member removed from a room stays removed (CONTRACT §6.1 "Membership is enforced live"), even when their
// client marks the room read at the same moment. markRead's upsert (rooms/members.ts) decides "is a member" from
// its statement snapshot (`exists (select 1 from old)`) and takes no room lock; its INSERT … ON CONFLICT waits for
// the removal's uncommitted DELETE and, once that commits, finds no conflicting row and inserts a fresh one: the
// removed member is back (with member_count not counting them).
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser, requestAs } from '../helpers/users.js';

const ROUNDS = 40;

describe('mark read racing a removal', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  const api = requestAs;

  beforeAll(async () => {
    env = await createTestEnv({ CHAT_ROOM_CREATES_PER_HOUR: '1000' });
    a = await env.app({ INSTANCE_ID: 'markread-a' });
    b = await env.app({ INSTANCE_ID: 'markread-b' });
  });
  afterAll(async () => {
    await env.close();
  });

  it('a member removed while marking the room read is not a member afterwards', async () => {
    const owner = await createVerifiedUser(a, env.smtp, { name: 'Owner' });
    const member = await createVerifiedUser(a, env.smtp, { name: 'Member' });
    const created = await api(a, owner, 'POST', '/chat/rooms', {
      name: 'private race',
      kind: 'private',
      memberIds: [member.id],
    });
    expect(created.statusCode, created.body).toBe(201);
    const roomId = created.json().room.id as string;
    const db = a.ctx.database.db;

    const resurrected: number[] = [];
    const countMismatch: Array<{ round: number; memberCount: number; rows: number }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (round > 0) {
        const add = await api(a, owner, 'POST', `/chat/rooms/${roomId}/members`, { userIds: [member.id] });
        expect(add.statusCode, add.body).toBe(200);
      }
      const [removed, read] = await Promise.all([
        api(a, owner, 'DELETE', `/chat/rooms/${roomId}/members/${member.id}`),
        api(b, member, 'POST', `/chat/rooms/${roomId}/read`, { seq: 0 }),
      ]);
      expect(removed.statusCode, removed.body).toBe(200);
      expect([200, 404], read.body).toContain(read.statusCode);
      // The removal returned 200: the member must be gone, everywhere.
      const view = await api(a, member, 'GET', `/chat/rooms/${roomId}`);
      if (view.statusCode !== 404) resurrected.push(round);
      const [row] = rowsOf<{ member_count: number; rows: number }>(
        await db.execute(sql`select r.member_count,
            (select count(*)::int from chat_member cm where cm.room_id = r.id) as rows
          from chat_room r where r.id = ${roomId}`),
      );
      if (row && Number(row.member_count) !== Number(row.rows))
        countMismatch.push({ round, memberCount: Number(row.member_count), rows: Number(row.rows) });
      // Put the room back to a known state for the next round (owner only).
      if (view.statusCode !== 404) {
        await db.execute(sql`delete from chat_member where room_id = ${roomId} and user_id = ${member.id}`);
        await db.execute(sql`update chat_room set member_count = 1 where id = ${roomId}`);
      }
    }
    expect(
      { resurrected, countMismatch },
      `removed member still a member after ${resurrected.length}/${ROUNDS} rounds`,
    ).toEqual({ resurrected: [], countMismatch: [] });
  }, 120_000);
});
