// Rooms come into being: a public or private room with its owner and first members, and the one direct room of
// a pair (created once; asked again, the same room with both as members again).
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Db } from '../../infra/db.js';
import { rowsOf } from '../../infra/db.js';
import { atRoomLimit, insertMembers, inTx, lockUsers, must, unknownUsers } from './member-writes.js';
import type { Caller, Room, RoomError, RoomLimits } from './model.js';
import { type RoomViews, viewOrThrow } from './views.js';

export interface RoomCreation {
  create(
    owner: Caller,
    input: { name: string; kind: 'public' | 'private'; memberIds: string[] },
  ): Promise<Room | RoomError>;
  direct(caller: Caller, otherId: string): Promise<{ room: Room; created: boolean } | RoomError>;
}

export function createRoomCreation(db: Db, limits: RoomLimits, views: RoomViews): RoomCreation {
  return {
    async create(owner, input) {
      const memberIds = [...new Set(input.memberIds)].filter((id) => id !== owner.userId);
      const unknown = await unknownUsers(db, memberIds);
      if (unknown.length > 0) return { error: 'user_not_found', userIds: unknown };
      if ((await atRoomLimit(db, limits, [owner.userId])).length > 0)
        return { error: 'room_limit', userIds: [owner.userId] };
      if (input.kind === 'private' && memberIds.length + 1 > limits.membersPerPrivateRoom) {
        return { error: 'room_full' };
      }
      const id = randomUUID();
      const result = await inTx(db, async (tx) => {
        await tx.execute(sql`insert into chat_room (id, kind, name, created_by, member_count)
          values (${id}, ${input.kind}, ${input.name}, ${owner.userId}, 0)`);
        // Every member's lock at once, in key order: locking the owner first and the others later could deadlock
        // with a room created at the same time by one of them for the owner.
        await lockUsers(tx, [owner.userId, ...memberIds]);
        must(await insertMembers(tx, limits, id, input.kind, [owner.userId], 'owner'));
        must(await insertMembers(tx, limits, id, input.kind, memberIds, 'member'));
        return id;
      });
      if (typeof result !== 'string') return result;
      return viewOrThrow(views, id, owner);
    },

    async direct(caller, otherId) {
      if (otherId === caller.userId)
        return { error: 'invalid', message: 'userId: a direct room needs another user' };
      const unknown = await unknownUsers(db, [otherId]);
      if (unknown.length > 0) return { error: 'user_not_found', userIds: unknown };
      const key = caller.userId < otherId ? `${caller.userId}:${otherId}` : `${otherId}:${caller.userId}`;
      const pair = [caller.userId, otherId];
      const result = await inTx(db, async (tx) => {
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
        must(await insertMembers(tx, limits, id, 'direct', pair, 'member'));
        return { id, created: inserted !== undefined };
      });
      if ('error' in result) return result;
      return { room: await viewOrThrow(views, result.id, caller), created: result.created };
    },
  };
}
