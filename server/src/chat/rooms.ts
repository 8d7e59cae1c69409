// Owns rooms and membership (§6.1): queries on chat_room and chat_member, the access rule every path applies
// (a private or direct room is invisible to non-members), the limits, and the one direct room per pair.
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Db } from '../infra/db.js';
import { rowsOf, textArray } from '../infra/db.js';
import { ChatLimits, GENERAL_ROOM_ID } from './protocol.js';

export type RoomKind = 'general' | 'public' | 'private' | 'direct';
export type MemberRole = 'owner' | 'member';

export interface Room {
  id: string;
  kind: RoomKind;
  name: string;
  createdBy: string | null;
  createdAt: string;
  memberCount: number;
  lastSeq: number;
  lastMessageAt: string | null;
  role?: MemberRole;
  lastReadSeq?: number;
  unreadCount?: number;
}

export interface RoomMember {
  userId: string;
  name: string;
  role: MemberRole;
  lastReadSeq: number;
}

/** What a caller may do with a room: null when it is invisible to them (missing, or private/direct and not theirs). */
export interface RoomAccess {
  id: string;
  kind: RoomKind;
  role: MemberRole | null;
  /** May read (history, subscribe): general, public, or a member (admins: any room). */
  canRead: boolean;
  /** May write: a member (general: everyone). */
  canWrite: boolean;
}

export interface Caller {
  userId: string;
  isAdmin: boolean;
}

export type RoomError =
  | { error: 'not_found' }
  | { error: 'forbidden'; message: string }
  | { error: 'room_limit'; userIds: string[] }
  | { error: 'room_full' }
  | { error: 'user_not_found'; userIds: string[] }
  | { error: 'invalid'; message: string };

export interface RoomLimits {
  roomsPerUser: number;
  membersPerPrivateRoom: number;
}

interface RoomRow {
  id: string;
  kind: RoomKind;
  name: string;
  created_by: string | null;
  created_at: string | Date;
  member_count: number;
  last_seq: string | number;
  last_message_at: string | Date | null;
  role?: MemberRole | null;
  last_read_seq?: string | number | null;
  unread?: string | number | null;
  other_name?: string | null;
}

const iso = (v: string | Date) => (v instanceof Date ? v : new Date(v)).toISOString();

export interface RoomsRepository {
  access(roomId: string, caller: Caller): Promise<RoomAccess | null>;
  /** The room as the caller sees it (with role, lastReadSeq, unreadCount when a member); null when invisible. */
  view(roomId: string, caller: Caller): Promise<Room | null>;
  members(roomId: string, limit: number): Promise<RoomMember[]>;
  /** `via`: where to read (a replica chosen by chat/reads.ts); the primary when absent. The same for listPublic. */
  listMine(userId: string, via?: Pick<Db, 'execute'>): Promise<Room[]>;
  listPublic(userId: string, limit: number, via?: Pick<Db, 'execute'>): Promise<Room[]>;
  create(
    owner: Caller,
    input: { name: string; kind: 'public' | 'private'; memberIds: string[] },
  ): Promise<Room | RoomError>;
  join(roomId: string, caller: Caller): Promise<Room | RoomError>;
  addMembers(roomId: string, caller: Caller, userIds: string[]): Promise<Room | RoomError>;
  /** Leave (yourself) or remove (owner or admin); `membersVersion` is the room's after the removal. */
  removeMember(
    roomId: string,
    caller: Caller,
    userId: string,
  ): Promise<{ removed: boolean; membersVersion: number; kind: RoomKind } | RoomError>;
  direct(caller: Caller, otherId: string): Promise<{ room: Room; created: boolean } | RoomError>;
  /** Stores max(stored, min(seq, lastSeq)); `changed` when it moved. */
  markRead(
    roomId: string,
    caller: Caller,
    seq: number,
  ): Promise<{ lastReadSeq: number; unreadCount: number; changed: boolean; kind: RoomKind } | RoomError>;
  /** Which of `userIds` are members of the room now (subscribers re-checked after a removal). */
  membersAmong(roomId: string, userIds: string[]): Promise<Set<string>>;
  /** Members of a room whose username is in `usernames` (mentions), with their names. */
  membersByUsername(roomId: string, usernames: string[]): Promise<Array<{ userId: string; name: string }>>;
  /** Member ids of a room, at most `limit` (direct rooms: both). */
  memberIds(roomId: string, limit: number): Promise<string[]>;
  /** Ids of the rooms the user is a member of (general only when a read position was stored there). */
  roomIdsOf(userId: string): Promise<string[]>;
}

export function createRoomsRepository(db: Db, limits: RoomLimits): RoomsRepository {
  const rows = async <T>(q: ReturnType<typeof sql>, via: Pick<Db, 'execute'> = db) =>
    rowsOf<T>(await via.execute(q));
  // `general` has every user as a member; its memberCount is the number of users, cached (a count of a table).
  let generalCount: { at: number; value: number } | undefined;
  const usersCount = async () => {
    const now = Date.now();
    if (generalCount && now - generalCount.at < 30_000) return generalCount.value;
    const r = await rows<{ n: number }>(sql`select count(*)::int as n from "user" where banned is not true`);
    generalCount = { at: now, value: r[0]?.n ?? 0 };
    return generalCount.value;
  };

  const unreadExpr = (userId: string) => sql`(select count(*)::int from (
      select 1 from chat_message m where m.room_id = r.id and m.seq > coalesce(cm.last_read_seq, 0)
        and m.user_id <> ${userId} limit ${ChatLimits.UNREAD_COUNT_CAP}) x)`;
  // A direct room is named after the other member.
  const otherName = (userId: string) => sql`case when r.kind = 'direct' then (
      select u.name from chat_member o join "user" u on u.id = o.user_id
      where o.room_id = r.id and o.user_id <> ${userId} limit 1) end`;

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

  const access = async (roomId: string, caller: Caller): Promise<RoomAccess | null> => {
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
  };

  const view = async (roomId: string, caller: Caller): Promise<Room | null> => {
    const r = await rows<RoomRow>(selectRoom(roomId, caller.userId));
    const row = r[0];
    if (!row) return null;
    const member = row.role !== null || row.kind === 'general';
    if (!member && row.kind !== 'public' && !caller.isAdmin) return null;
    return toRoom(row, member);
  };

  /** Users among `userIds` already at the rooms-per-user limit. */
  const atRoomLimit = async (userIds: string[]): Promise<string[]> => {
    if (userIds.length === 0) return [];
    const r = await rows<{ user_id: string }>(sql`
      select user_id from chat_member where user_id = any(${textArray(userIds)})
        and room_id <> ${GENERAL_ROOM_ID}
      group by user_id having count(*) >= ${limits.roomsPerUser}`);
    return r.map((x) => x.user_id);
  };
  const unknownUsers = async (userIds: string[]): Promise<string[]> => {
    if (userIds.length === 0) return [];
    const r = await rows<{ id: string }>(
      sql`select id from "user" where id = any(${textArray(userIds)}) and banned is not true`,
    );
    const found = new Set(r.map((x) => x.id));
    return userIds.filter((id) => !found.has(id));
  };

  /**
   * Adds members inside a transaction holding the room's lock: checks the private-room size and each new
   * member's room count there, so concurrent adds cannot overshoot either limit.
   */
  const insertMembers = async (
    tx: Pick<Db, 'execute'>,
    roomId: string,
    kind: RoomKind,
    userIds: string[],
    role: MemberRole,
  ): Promise<RoomError | number> => {
    if (userIds.length === 0) return 0;
    const fresh = rowsOf<{ user_id: string }>(
      await tx.execute(sql`
        select u.id as user_id from unnest(${textArray(userIds)}) as u(id)
        where not exists (select 1 from chat_member cm where cm.room_id = ${roomId} and cm.user_id = u.id)`),
    ).map((r) => r.user_id);
    if (fresh.length === 0) return 0;
    if (kind === 'private') {
      const count = rowsOf<{ member_count: number }>(
        await tx.execute(sql`select member_count from chat_room where id = ${roomId}`),
      )[0];
      if ((count?.member_count ?? 0) + fresh.length > limits.membersPerPrivateRoom)
        return { error: 'room_full' };
    }
    const full = rowsOf<{ user_id: string }>(
      await tx.execute(sql`
        select user_id from chat_member where user_id = any(${textArray(fresh)})
          and room_id <> ${GENERAL_ROOM_ID}
        group by user_id having count(*) >= ${limits.roomsPerUser}`),
    ).map((r) => r.user_id);
    if (full.length > 0) return { error: 'room_limit', userIds: full };
    await tx.execute(sql`
      insert into chat_member (room_id, user_id, role, last_read_seq)
      select ${roomId}, u.id, ${role}, r.last_seq from unnest(${textArray(fresh)}) as u(id), chat_room r
      where r.id = ${roomId}
      on conflict do nothing`);
    await tx.execute(
      sql`update chat_room set member_count = member_count + ${fresh.length} where id = ${roomId}`,
    );
    return fresh.length;
  };

  const lockRoom = async (tx: Pick<Db, 'execute'>, roomId: string) =>
    rowsOf<{ kind: RoomKind }>(
      await tx.execute(sql`select kind from chat_room where id = ${roomId} for update`),
    )[0];

  class Abort extends Error {
    constructor(readonly result: RoomError) {
      super(result.error);
    }
  }
  const inTx = async <T>(fn: (tx: Pick<Db, 'execute'>) => Promise<T>): Promise<T | RoomError> => {
    try {
      return await db.transaction(async (tx) => fn(tx));
    } catch (err) {
      if (err instanceof Abort) return err.result;
      throw err;
    }
  };
  const must = <T>(value: T | RoomError): T => {
    if (typeof value === 'object' && value !== null && 'error' in value) throw new Abort(value as RoomError);
    return value as T;
  };

  const viewOrThrow = async (roomId: string, caller: Caller) => {
    const room = await view(roomId, caller);
    if (!room) throw new Error(`room ${roomId} vanished`);
    return room;
  };

  return {
    access,
    view,

    async members(roomId, limit) {
      const r = await rows<{
        user_id: string;
        name: string;
        role: MemberRole;
        last_read_seq: string | number;
      }>(sql`
        select cm.user_id, u.name, cm.role, cm.last_read_seq from chat_member cm join "user" u on u.id = cm.user_id
        where cm.room_id = ${roomId} order by (cm.role = 'owner') desc, cm.joined_at, cm.user_id limit ${limit}`);
      return r.map((m) => ({
        userId: m.user_id,
        name: m.name,
        role: m.role,
        lastReadSeq: Number(m.last_read_seq),
      }));
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

    async create(owner, input) {
      const memberIds = [...new Set(input.memberIds)].filter((id) => id !== owner.userId);
      const unknown = await unknownUsers(memberIds);
      if (unknown.length > 0) return { error: 'user_not_found', userIds: unknown };
      if ((await atRoomLimit([owner.userId])).length > 0)
        return { error: 'room_limit', userIds: [owner.userId] };
      if (input.kind === 'private' && memberIds.length + 1 > limits.membersPerPrivateRoom) {
        return { error: 'room_full' };
      }
      const id = randomUUID();
      const result = await inTx(async (tx) => {
        await tx.execute(sql`insert into chat_room (id, kind, name, created_by, member_count)
          values (${id}, ${input.kind}, ${input.name}, ${owner.userId}, 0)`);
        must(await insertMembers(tx, id, input.kind, [owner.userId], 'owner'));
        must(await insertMembers(tx, id, input.kind, memberIds, 'member'));
        return id;
      });
      if (typeof result !== 'string') return result;
      return viewOrThrow(id, owner);
    },

    async join(roomId, caller) {
      const a = await access(roomId, caller);
      if (!a || (a.kind !== 'public' && a.role === null)) return { error: 'not_found' };
      if (a.kind === 'general' || a.role !== null) return viewOrThrow(roomId, caller);
      const result = await inTx(async (tx) => {
        const room = await lockRoom(tx, roomId);
        if (!room) throw new Abort({ error: 'not_found' });
        return must(await insertMembers(tx, roomId, room.kind, [caller.userId], 'member'));
      });
      if (typeof result !== 'number') return result;
      return viewOrThrow(roomId, caller);
    },

    async addMembers(roomId, caller, userIds) {
      const a = await access(roomId, caller);
      if (!a) return { error: 'not_found' };
      if (a.kind === 'general' || a.kind === 'direct') {
        return { error: 'forbidden', message: `Members of a ${a.kind} room cannot be changed` };
      }
      if (a.role !== 'owner' && !caller.isAdmin) {
        return { error: 'forbidden', message: 'Only the owner or an administrator can add members' };
      }
      const ids = [...new Set(userIds)];
      const unknown = await unknownUsers(ids);
      if (unknown.length > 0) return { error: 'user_not_found', userIds: unknown };
      const result = await inTx(async (tx) => {
        const room = await lockRoom(tx, roomId);
        if (!room) throw new Abort({ error: 'not_found' });
        return must(await insertMembers(tx, roomId, room.kind, ids, 'member'));
      });
      if (typeof result !== 'number') return result;
      return viewOrThrow(roomId, caller);
    },

    async removeMember(roomId, caller, userId) {
      const a = await access(roomId, caller);
      if (!a) return { error: 'not_found' };
      if (a.kind === 'general') return { error: 'forbidden', message: 'Nobody leaves the general room' };
      const self = userId === caller.userId;
      if (!self && a.role !== 'owner' && !caller.isAdmin) {
        return { error: 'forbidden', message: 'Only the owner or an administrator can remove members' };
      }
      const result = await inTx(async (tx) => {
        const room = await lockRoom(tx, roomId);
        if (!room) throw new Abort({ error: 'not_found' });
        const gone = rowsOf<{ role: MemberRole }>(
          await tx.execute(
            sql`delete from chat_member where room_id = ${roomId} and user_id = ${userId} returning role`,
          ),
        )[0];
        if (!gone) {
          const v = rowsOf<{ members_version: string | number }>(
            await tx.execute(sql`select members_version from chat_room where id = ${roomId}`),
          )[0];
          return { removed: false, membersVersion: Number(v?.members_version ?? 0), kind: room.kind };
        }
        // An owner who leaves hands the room to its longest-standing member, so it is never ownerless.
        if (gone.role === 'owner') {
          await tx.execute(sql`update chat_member set role = 'owner' where (room_id, user_id) = (
            select room_id, user_id from chat_member where room_id = ${roomId}
            order by joined_at, user_id limit 1)`);
        }
        const v = rowsOf<{ members_version: string | number }>(
          await tx.execute(sql`update chat_room set member_count = member_count - 1,
            members_version = members_version + 1 where id = ${roomId} returning members_version`),
        )[0];
        return { removed: true, membersVersion: Number(v?.members_version ?? 0), kind: room.kind };
      });
      return result;
    },

    async direct(caller, otherId) {
      if (otherId === caller.userId)
        return { error: 'invalid', message: 'userId: a direct room needs another user' };
      const unknown = await unknownUsers([otherId]);
      if (unknown.length > 0) return { error: 'user_not_found', userIds: unknown };
      const key = caller.userId < otherId ? `${caller.userId}:${otherId}` : `${otherId}:${caller.userId}`;
      const pair = [caller.userId, otherId];
      const result = await inTx(async (tx) => {
        // The unique direct_key makes a concurrent second request wait for the first and then find its room.
        const inserted = rowsOf<{ id: string }>(
          await tx.execute(sql`insert into chat_room (id, kind, name, created_by, direct_key)
            values (${randomUUID()}, 'direct', '', ${caller.userId}, ${key})
            on conflict (direct_key) do nothing returning id`),
        )[0];
        const id =
          inserted?.id ??
          rowsOf<{ id: string }>(
            await tx.execute(sql`select id from chat_room where direct_key = ${key} for update`),
          )[0]?.id;
        if (!id) throw new Error('direct room neither inserted nor found');
        // Both are (again) members: one who left gets the conversation back.
        must(await insertMembers(tx, id, 'direct', pair, 'member'));
        return { id, created: inserted !== undefined };
      });
      if ('error' in result) return result;
      return { room: await viewOrThrow(result.id, caller), created: result.created };
    },

    async markRead(roomId, caller, seq) {
      const a = await access(roomId, caller);
      if (!a || (a.role === null && a.kind !== 'general')) return { error: 'not_found' };
      // Only general may lack a member row (every user is in it): the first read creates it.
      const r = await rows<{ last_read_seq: string | number; changed: boolean; kind: RoomKind }>(sql`
        with room as (select id, kind, last_seq from chat_room where id = ${roomId}),
        target as (select least(${seq}::bigint, room.last_seq) as s from room),
        old as (select last_read_seq from chat_member where room_id = ${roomId} and user_id = ${caller.userId}),
        up as (
          insert into chat_member (room_id, user_id, role, last_read_seq)
          select ${roomId}, ${caller.userId}, 'member', target.s from target
          where ${roomId} = ${GENERAL_ROOM_ID} or exists (select 1 from old)
          on conflict (room_id, user_id) do update
            set last_read_seq = greatest(chat_member.last_read_seq, excluded.last_read_seq)
          returning last_read_seq
        )
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
        ? await rows<{ id: string; name: string }>(sql`select id, name from "user"
            where lower(username) = any(${textArray(lower)}) and banned is not true`)
        : await rows<{ id: string; name: string }>(sql`select u.id, u.name from chat_member cm
            join "user" u on u.id = cm.user_id
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
        sql`select user_id from chat_member where room_id = ${roomId} limit ${limit}`,
      );
      return r.map((x) => x.user_id);
    },
  };
}
