// Who is in a room and how far each member has read: the member list, the read positions (receipts) with unread
// counts, and the membership lookups other chat parts ask for (subscriber re-checks, mentions, notifications).
import { sql } from 'drizzle-orm';
import { accountRelations } from '../../auth/accounts.js';
import type { Db } from '../../infra/db.js';
import { textArray } from '../../infra/db.js';
import { ChatLimits, GENERAL_ROOM_ID } from '../protocol.js';
import type { Caller, MemberRole, RoomError, RoomKind, RoomMember } from './model.js';
import { rowsFrom } from './queries.js';
import type { RoomViews } from './views.js';

export interface RoomMembers {
  members(roomId: string, limit: number): Promise<RoomMember[]>;
  /** Stores max(stored, min(seq, lastSeq)); `changed` when it moved. */
  markRead(
    roomId: string,
    caller: Caller,
    seq: number,
  ): Promise<{ lastReadSeq: number; unreadCount: number; changed: boolean; kind: RoomKind } | RoomError>;
  /** Which of `userIds` are members of the room now (subscribers re-checked after a removal). */
  membersAmong(roomId: string, userIds: string[]): Promise<Set<string>>;
  /**
   * Members of a room whose username is in `usernames` (mentions), with their names; only those with no ban in
   * force (who chat may notify: a banned user is notified of nothing, as the admin send skips them too).
   */
  membersByUsername(roomId: string, usernames: string[]): Promise<Array<{ userId: string; name: string }>>;
  /** Member ids of a room with no ban in force, at most `limit` (direct rooms: both; see membersByUsername). */
  memberIds(roomId: string, limit: number): Promise<string[]>;
  /** Ids of the rooms the user is a member of (general only when a read position was stored there). */
  roomIdsOf(userId: string): Promise<string[]>;
}

export function createRoomMembers(db: Db, views: RoomViews): RoomMembers {
  const rows = rowsFrom(db);
  return {
    async members(roomId, limit) {
      const r = await rows<{
        user_id: string;
        name: string;
        role: MemberRole;
        last_read_seq: string | number;
      }>(sql`
        select cm.user_id, u.name, cm.role, cm.last_read_seq
        from chat_member cm join ${accountRelations.profiles} u on u.id = cm.user_id
        where cm.room_id = ${roomId} order by (cm.role = 'owner') desc, cm.joined_at, cm.user_id limit ${limit}`);
      return r.map((m) => ({
        userId: m.user_id,
        name: m.name,
        role: m.role,
        lastReadSeq: Number(m.last_read_seq),
      }));
    },

    async markRead(roomId, caller, seq) {
      const a = await views.access(roomId, caller);
      if (!a || (a.role === null && a.kind !== 'general')) return { error: 'not_found' };
      // Only general may lack a member row (every user is in it): the first read creates it. Any other room's read
      // position is only ever updated, never inserted: a removal committing while this statement waits for its row
      // leaves nothing to update, and the caller gets not_found instead of a member row back (an upsert decided
      // "member" from its snapshot and re-inserted the removed member: 8–20 of 40 racing rounds).
      const up =
        roomId === GENERAL_ROOM_ID
          ? sql`insert into chat_member (room_id, user_id, role, last_read_seq)
          select ${roomId}, ${caller.userId}, 'member', target.s from target
          on conflict (room_id, user_id) do update
            set last_read_seq = greatest(chat_member.last_read_seq, excluded.last_read_seq)
          returning last_read_seq`
          : sql`update chat_member set last_read_seq = greatest(chat_member.last_read_seq, target.s) from target
          where room_id = ${roomId} and user_id = ${caller.userId}
          returning chat_member.last_read_seq`;
      const r = await rows<{ last_read_seq: string | number; changed: boolean; kind: RoomKind }>(sql`
        with room as (select id, kind, last_seq from chat_room where id = ${roomId}),
        target as (select least(${seq}::bigint, room.last_seq) as s from room),
        old as (select last_read_seq from chat_member where room_id = ${roomId} and user_id = ${caller.userId}),
        up as (${up})
        select up.last_read_seq, (up.last_read_seq > coalesce((select last_read_seq from old), -1)) as changed,
          (select kind from room) as kind
        from up`);
      const row = r[0];
      if (!row) return { error: 'not_found' };
      const lastReadSeq = Number(row.last_read_seq);
      const unread = await rows<{ n: number }>(sql`select count(*)::int as n from (
        select 1 from chat_message where room_id = ${roomId} and seq > ${lastReadSeq}
          and user_id <> ${caller.userId} limit ${ChatLimits.UNREAD_COUNT_CAP}) x`);
      return { lastReadSeq, unreadCount: unread[0]?.n ?? 0, changed: row.changed, kind: row.kind };
    },

    async membersAmong(roomId, userIds) {
      if (userIds.length === 0) return new Set();
      const r = await rows<{ user_id: string }>(sql`select user_id from chat_member
        where room_id = ${roomId} and user_id = any(${textArray(userIds)})`);
      return new Set(r.map((x) => x.user_id));
    },

    async membersByUsername(roomId, usernames) {
      if (usernames.length === 0) return [];
      const lower = usernames.map((u) => u.toLowerCase());
      const general = roomId === GENERAL_ROOM_ID;
      const r = general
        ? await rows<{
            id: string;
            name: string;
          }>(sql`select id, name from ${accountRelations.unbannedProfiles} u
            where lower(username) = any(${textArray(lower)})`)
        : await rows<{ id: string; name: string }>(sql`select u.id, u.name from chat_member cm
            join ${accountRelations.unbannedProfiles} u on u.id = cm.user_id
            where cm.room_id = ${roomId} and lower(u.username) = any(${textArray(lower)})`);
      return r.map((x) => ({ userId: x.id, name: x.name }));
    },

    async roomIdsOf(userId) {
      const r = await rows<{ room_id: string }>(
        sql`select room_id from chat_member where user_id = ${userId}`,
      );
      return r.map((x) => x.room_id);
    },

    async memberIds(roomId, limit) {
      const r = await rows<{ user_id: string }>(
        sql`select cm.user_id from chat_member cm join ${accountRelations.unbanned} u on u.id = cm.user_id
            where cm.room_id = ${roomId} limit ${limit}`,
      );
      return r.map((x) => x.user_id);
    },
  };
}
