// The room directory: my rooms or the public ones, creating a room, and one room with its members.
import { z } from 'zod';
import { CONTROL_MESSAGE, hasControl, hasInvisible, INVISIBLE_MESSAGE } from '../../http/display-text.js';
import { httpError } from '../../http/errors.js';
import { ErrorSchema, noNul } from '../../http/schemas.js';
import { GENERAL_ROOM_ID } from '../protocol.js';
import type { Room } from '../rooms.js';
import type { RoomRouteKit } from './kit.js';
import { errors, fail, MemberSchema, NO_NUL, ok, RoomParams, RoomSchema, UserIdSchema } from './schemas.js';

export function registerRoomDirectoryRoutes({ r, guard, security, callerOf, deps }: RoomRouteKit): void {
  const { rooms, reads } = deps;

  r.get(
    '/chat/rooms',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'List my rooms (most recent activity first, with unread counts) or public rooms to join',
        security,
        querystring: z.strictObject({
          scope: z.enum(['mine', 'public']).default('mine').describe('`mine` (default) or `public`'),
        }),
        response: { 200: z.object({ rooms: z.array(RoomSchema) }), ...errors },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      // The caller's own changes (joins, reads, rooms created) and changes made for them (added, removed) record
      // their position on the caller: the list is read from a source that has them.
      if (request.query.scope === 'public') {
        return {
          rooms: await reads.read({ users: [caller.userId], publicDirectory: true }, (db) =>
            rooms.listPublic(caller.userId, 200, db),
          ),
        };
      }
      // My rooms' last messages and unread counts change with anyone's message: the list must also be as new as
      // each of my rooms' last change (a list read after a live frame shows that message). Which rooms are mine
      // comes from the primary (one index lookup); the heavy part, the counts, from the replica.
      const mine = reads.enabled ? await rooms.roomIdsOf(caller.userId) : [];
      const scope = { users: [caller.userId], rooms: [GENERAL_ROOM_ID, ...mine] };
      return { rooms: await reads.read(scope, (db) => rooms.listMine(caller.userId, db)) };
    },
  );

  r.post(
    '/chat/rooms',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'Create a public or private room; the caller is its owner',
        security,
        body: z.strictObject({
          name: z
            .string()
            .trim()
            .min(1)
            .max(80)
            .refine(noNul, NO_NUL)
            // Shown to every member and in the public directory: one line, nothing invisible (issue 22 #8).
            .refine((v) => !hasControl(v), CONTROL_MESSAGE)
            .refine((v) => !hasInvisible(v), INVISIBLE_MESSAGE),
          kind: z.enum(['public', 'private']),
          memberIds: z.array(UserIdSchema).max(100).optional(),
        }),
        response: { 201: z.object({ room: RoomSchema }), 429: ErrorSchema, ...errors },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const limited = await deps.createLimit.hit(caller.userId);
      if (!limited.ok) {
        const seconds = Math.max(1, Math.ceil(limited.retryAfterMs / 1000));
        throw httpError('RATE_LIMITED', 'Too many rooms created (CHAT_ROOM_CREATES_PER_HOUR)', {
          headers: { 'retry-after': String(seconds) },
        });
      }
      const { name, kind, memberIds = [] } = request.body;
      const room = ok<Room>(await rooms.create(caller, { name, kind, memberIds }));
      await reads.changed({
        users: [caller.userId, ...memberIds],
        rooms: [room.id],
        publicDirectory: kind === 'public',
      });
      return reply.code(201).send({ room });
    },
  );

  r.get(
    '/chat/rooms/:id',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'A room with its members (at most 200)',
        security,
        params: RoomParams,
        response: { 200: z.object({ room: RoomSchema, members: z.array(MemberSchema) }), ...errors },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      const room = await rooms.view(request.params.id, caller);
      if (!room) fail({ error: 'not_found' });
      // general's members are every user: listing them is not what a room page needs.
      const members = room.kind === 'general' ? [] : await rooms.members(room.id, 200);
      return { room, members };
    },
  );
}
