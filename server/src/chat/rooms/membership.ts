// Membership changes of an existing room: join a public room, add members (owner or admin), leave or remove
// (owner or admin; an owner who leaves hands the room on). Each runs under the room row's lock.
import { sql } from 'drizzle-orm';
import type { Db } from '../../infra/db.js';
import { rowsOf } from '../../infra/db.js';
import { Abort, insertMembers, inTx, lockRoom, must, unknownUsers } from './member-writes.js';
import type { Caller, MemberRole, Room, RoomError, RoomKind, RoomLimits } from './model.js';
import { type RoomViews, viewOrThrow } from './views.js';

export interface RoomMembership {
  join(roomId: string, caller: Caller): Promise<Room | RoomError>;
  addMembers(roomId: string, caller: Caller, userIds: string[]): Promise<Room | RoomError>;
  /** Leave (yourself) or remove (owner or admin); `membersVersion` is the room's after the removal. */
  removeMember(
    roomId: string,
    caller: Caller,
    userId: string,
  ): Promise<{ removed: boolean; membersVersion: number; kind: RoomKind } | RoomError>;
}

export function createRoomMembership(db: Db, limits: RoomLimits, views: RoomViews): RoomMembership {
  const { access } = views;
  return {
    async join(roomId, caller) {
      const a = await access(roomId, caller);
      if (!a || (a.kind !== 'public' && a.role === null)) return { error: 'not_found' };
      if (a.kind === 'general' || a.role !== null) return viewOrThrow(views, roomId, caller);
      const result = await inTx(db, async (tx) => {
        const room = await lockRoom(tx, roomId);
        if (!room) throw new Abort({ error: 'not_found' });
        return must(await insertMembers(tx, limits, roomId, room.kind, [caller.userId], 'member'));
      });
      if (typeof result !== 'number') return result;
      return viewOrThrow(views, roomId, caller);
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
      const unknown = await unknownUsers(db, ids);
      if (unknown.length > 0) return { error: 'user_not_found', userIds: unknown };
      const result = await inTx(db, async (tx) => {
        const room = await lockRoom(tx, roomId);
        if (!room) throw new Abort({ error: 'not_found' });
        return must(await insertMembers(tx, limits, roomId, room.kind, ids, 'member'));
      });
      if (typeof result !== 'number') return result;
      return viewOrThrow(views, roomId, caller);
    },

    async removeMember(roomId, caller, userId) {
      const a = await access(roomId, caller);
      if (!a) return { error: 'not_found' };
      if (a.kind === 'general') return { error: 'forbidden', message: 'Nobody leaves the general room' };
      const self = userId === caller.userId;
      if (!self && a.role !== 'owner' && !caller.isAdmin) {
        return { error: 'forbidden', message: 'Only the owner or an administrator can remove members' };
      }
      const result = await inTx(db, async (tx) => {
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
  };
}
