// Rooms as a caller sees them: the access rule every path applies (a private or direct room is invisible to
// non-members), one room with the caller's membership, and the room lists (mine, public).
import { sql } from 'drizzle-orm';
import { accountRelations } from '../../auth/accounts.js';
import type { Db } from '../../infra/db.js';
import { GENERAL_ROOM_ID } from '../protocol.js';
import type { Caller, MemberRole, Room, RoomAccess, RoomKind } from './model.js';
import { type Exec, otherName, type RoomRow, rowsFrom, unreadExpr } from './queries.js';

export interface RoomViews {
  access(roomId: string, caller: Caller): Promise<RoomAccess | null>;
  /** The room as the caller sees it (with role, lastReadSeq, unreadCount when a member); null when invisible. */
  view(roomId: string, caller: Caller): Promise<Room | null>;
  /** `via`: where to read (a replica chosen by chat/reads.ts); the primary when absent. The same for listPublic. */
  listMine(userId: string, via?: Exec): Promise<Room[]>;
  listPublic(userId: string, limit: number, via?: Exec): Promise<Room[]>;
}

const iso = (v: string | Date) => (v instanceof Date ? v : new Date(v)).toISOString();

export function createRoomViews(db: Db): RoomViews {
  const rows = rowsFrom(db);
  // `general` has every user as a member; its memberCount is the number of users, cached (a count of a table).
  let generalCount: { at: number; value: number } | undefined;
  const usersCount = async () => {
    const now = Date.now();
    if (generalCount && now - generalCount.at < 30_000) return generalCount.value;
    const r = await rows<{ n: number }>(
      sql`select count(*)::int as n from ${accountRelations.unbannedProfiles} u`,
    );
    generalCount = { at: now, value: r[0]?.n ?? 0 };
    return generalCount.value;
  };

  const toRoom = async (row: RoomRow, withMembership: boolean): Promise<Room> => {
    const room: Room = {
      id: row.id,
      kind: row.kind,
      name: row.kind === 'direct' ? (row.other_name ?? row.name) : row.name,
      createdBy: row.created_by,
      createdAt: iso(row.created_at),
      memberCount: row.kind === 'general' ? await usersCount() : Number(row.member_count),
      lastSeq: Number(row.last_seq),
      lastMessageAt: row.last_message_at === null ? null : iso(row.last_message_at),
    };
    if (withMembership) {
      room.role = row.role ?? 'member';
      room.lastReadSeq = Number(row.last_read_seq ?? 0);
      room.unreadCount = Number(row.unread ?? 0);
    }
    return room;
  };

  const selectRoom = (roomId: string, userId: string) => sql`
    select r.*, cm.role, cm.last_read_seq, ${unreadExpr(userId)} as unread, ${otherName(userId)} as other_name
    from chat_room r left join chat_member cm on cm.room_id = r.id and cm.user_id = ${userId}
    where r.id = ${roomId}`;

  return {
    async access(roomId, caller) {
      const r = await rows<{ kind: RoomKind; role: MemberRole | null }>(sql`
      select r.kind, cm.role from chat_room r
      left join chat_member cm on cm.room_id = r.id and cm.user_id = ${caller.userId}
      where r.id = ${roomId}`);
      const row = r[0];
      if (!row) return null;
      const member = row.role !== null || row.kind === 'general';
      const visible = member || row.kind === 'public' || caller.isAdmin;
      if (!visible) return null;
      return {
        id: roomId,
        kind: row.kind,
        role: row.role ?? (row.kind === 'general' ? 'member' : null),
        canRead: true,
        canWrite: member,
      };
    },

    async view(roomId, caller) {
      const r = await rows<RoomRow>(selectRoom(roomId, caller.userId));
      const row = r[0];
      if (!row) return null;
      const member = row.role !== null || row.kind === 'general';
      if (!member && row.kind !== 'public' && !caller.isAdmin) return null;
      return toRoom(row, member);
    },

    async listMine(userId, via) {
      const r = await rows<RoomRow>(
        sql`
        select r.*, cm.role, cm.last_read_seq, ${unreadExpr(userId)} as unread, ${otherName(userId)} as other_name
        from chat_room r left join chat_member cm on cm.room_id = r.id and cm.user_id = ${userId}
        where r.id in (select room_id from chat_member where user_id = ${userId} union select ${GENERAL_ROOM_ID})
        order by coalesce(r.last_message_at, r.created_at) desc, r.id`,
        via,
      );
      return Promise.all(r.map((row) => toRoom(row, true)));
    },

    async listPublic(userId, limit, via) {
      const r = await rows<RoomRow>(
        sql`
        select r.*, cm.role, cm.last_read_seq, ${unreadExpr(userId)} as unread
        from chat_room r left join chat_member cm on cm.room_id = r.id and cm.user_id = ${userId}
        where r.kind = 'public'
        order by coalesce(r.last_message_at, r.created_at) desc, r.id limit ${limit}`,
        via,
      );
      return Promise.all(r.map((row) => toRoom(row, row.role !== null && row.role !== undefined)));
    },
  };
}

/** The room after a change that made it visible to the caller (it cannot be missing now). */
export const viewOrThrow = async (views: RoomViews, roomId: string, caller: Caller): Promise<Room> => {
  const room = await views.view(roomId, caller);
  if (!room) throw new Error(`room ${roomId} vanished`);
  return room;
};
