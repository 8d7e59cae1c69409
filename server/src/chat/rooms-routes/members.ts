// Membership over HTTP: join a public room, add members, leave or remove (effective on every instance before
// the request returns), and the one direct room of a pair.
import { z } from 'zod';
import { RoomIdSchema } from '../protocol.js';
import type { Room } from '../rooms.js';
import type { RoomRouteKit } from './kit.js';
import { errors, fail, ok, RoomParams, RoomSchema, UserIdSchema } from './schemas.js';

export function registerRoomMemberRoutes({ r, guard, security, callerOf, deps }: RoomRouteKit): void {
  const { rooms, reads } = deps;

  r.post(
    '/chat/rooms/:id/join',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'Join a public room (already a member: the room as it is)',
        security,
        params: RoomParams,
        response: { 200: z.object({ room: RoomSchema }), ...errors },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      const room = ok<Room>(await rooms.join(request.params.id, caller));
      await reads.changed({
        users: [caller.userId],
        rooms: [room.id],
        publicDirectory: room.kind === 'public',
      });
      return { room };
    },
  );

  r.post(
    '/chat/rooms/:id/members',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'Add members (owner or admin)',
        security,
        params: RoomParams,
        body: z.strictObject({ userIds: z.array(UserIdSchema).min(1).max(100) }),
        response: { 200: z.object({ room: RoomSchema }), ...errors },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      const room = ok<Room>(await rooms.addMembers(request.params.id, caller, request.body.userIds));
      await reads.changed({
        users: [caller.userId, ...request.body.userIds],
        rooms: [room.id],
        publicDirectory: room.kind === 'public',
      });
      return { room };
    },
  );

  r.delete(
    '/chat/rooms/:id/members/:userId',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'Leave (yourself) or remove a member (owner or admin); takes effect on every instance',
        description:
          'When this returns, the member is no longer a member in PostgreSQL, their subscriptions of the room ' +
          'on this instance have ended, and the removal was published to every instance subscribed to the ' +
          'room. Any instance that receives a message stored after the removal re-checks its subscribers first, ' +
          'so the removed member receives nothing sent after this request, on any instance.',
        security,
        params: z.strictObject({ id: RoomIdSchema, userId: UserIdSchema }),
        response: { 200: z.object({ roomId: z.string(), userId: z.string() }), ...errors },
      },
    },
    async (request) => {
      const { id, userId } = request.params;
      const caller = callerOf(request);
      const result = ok(await rooms.removeMember(id, caller, userId));
      if (!result.removed) fail({ error: 'not_found' });
      // The removed member's room list drops the room at once. Their history reads are refused by the primary's
      // membership check, whatever a replica still says.
      await reads.changed({
        users: [caller.userId, userId],
        rooms: [id],
        publicDirectory: result.kind === 'public',
      });
      deps.removeLocally(id, userId);
      deps.publish({ type: 'member_removed', roomId: id, userId });
      return { roomId: id, userId };
    },
  );

  r.post(
    '/chat/direct',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'The one direct room of the caller and another user (201 the first time, 200 after)',
        security,
        body: z.strictObject({ userId: UserIdSchema }),
        response: { 200: z.object({ room: RoomSchema }), 201: z.object({ room: RoomSchema }), ...errors },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const result = ok(await rooms.direct(caller, request.body.userId));
      await reads.changed({ users: [caller.userId, request.body.userId], rooms: [result.room.id] });
      return reply.code(result.created ? 201 : 200).send({ room: result.room });
    },
  );
}
