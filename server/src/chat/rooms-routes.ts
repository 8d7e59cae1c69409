// Owns the HTTP routes of rooms and direct messages (§6.1): listing, creating, joining, members, the one direct
// room per pair, history per room and the read position. Every route needs a session; a private or direct room
// the caller is not a member of answers 404 NOT_FOUND, exactly as a missing one.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf, requireUser, type SessionResolver } from '../auth/guard.js';
import { CONTROL_MESSAGE, hasControl, hasInvisible, INVISIBLE_MESSAGE } from '../http/display-text.js';
import { AppError, forbidden, httpError, notFound } from '../http/errors.js';
import { ErrorSchema, noNul } from '../http/schemas.js';
import {
  type ChatBusEvent,
  ChatLimits,
  GENERAL_ROOM_ID,
  RoomIdSchema,
  RoomMessageSchema,
} from './protocol.js';
import type { ChatReads } from './reads.js';
import type { ChatRepository } from './repository.js';
import type { Caller, Room, RoomError, RoomsRepository } from './rooms.js';
import type { MessageThrottle } from './throttle.js';

const NO_NUL = { message: 'must not contain NUL (U+0000) characters' };
const UserIdSchema = z.string().min(1).max(255).refine(noNul, NO_NUL);

export const RoomSchema = z
  .object({
    id: z.string(),
    kind: z.enum(['general', 'public', 'private', 'direct']),
    name: z.string().describe("The room's name; a direct room is named after the other member"),
    createdBy: z.string().nullable(),
    createdAt: z.string().meta({ format: 'date-time' }),
    memberCount: z.number().int().min(0),
    lastSeq: z.number().int().min(0).describe('Seq of the newest message (0: none yet)'),
    lastMessageAt: z.string().meta({ format: 'date-time' }).nullable(),
    role: z.enum(['owner', 'member']).optional().describe("The caller's role (the caller's own rooms only)"),
    lastReadSeq: z.number().int().min(0).optional(),
    unreadCount: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        `Messages after lastReadSeq not sent by the caller (counted up to ${ChatLimits.UNREAD_COUNT_CAP})`,
      ),
  })
  .meta({
    id: 'ChatRoom',
    example: {
      id: '6f1c2a4e-8b0d-4c6e-9a51-3d2f7e8b9c10',
      kind: 'private',
      name: 'Release planning',
      createdBy: 'u_8Jd2kq',
      createdAt: '2026-01-01T12:00:00.000Z',
      memberCount: 4,
      lastSeq: 42,
      lastMessageAt: '2026-01-02T09:30:00.000Z',
      role: 'owner',
      lastReadSeq: 40,
      unreadCount: 2,
    },
  });

export const MemberSchema = z.object({
  userId: z.string(),
  name: z.string(),
  role: z.enum(['owner', 'member']),
  lastReadSeq: z.number().int().min(0),
});

const RoomParams = z.strictObject({ id: RoomIdSchema });
const seqParam = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

const errors = { 400: ErrorSchema, 401: ErrorSchema, 403: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema };

function fail(e: RoomError): never {
  switch (e.error) {
    case 'not_found':
      throw notFound('Room not found');
    case 'forbidden':
      throw forbidden(e.message);
    case 'room_limit':
      throw new AppError(
        409,
        'ROOM_LIMIT',
        'A user would belong to more rooms than allowed (CHAT_MAX_ROOMS_PER_USER)',
        e.userIds.map((id) => ({ path: 'userId', message: id })),
      );
    case 'room_full':
      throw new AppError(
        409,
        'ROOM_FULL',
        'The room would have more members than allowed (CHAT_MAX_PRIVATE_ROOM_MEMBERS)',
      );
    case 'user_not_found':
      throw new AppError(
        404,
        'USER_NOT_FOUND',
        'No such user',
        e.userIds.map((id) => ({ path: 'userIds', message: id })),
      );
    case 'invalid':
      throw httpError('VALIDATION_ERROR', e.message, { details: [{ path: 'userId', message: e.message }] });
  }
}
const ok = <T>(value: T | RoomError): T => {
  if (typeof value === 'object' && value !== null && 'error' in value) fail(value as RoomError);
  return value as T;
};

export interface RoomRoutesDeps {
  rooms: RoomsRepository;
  sessions: SessionResolver;
  repo: ChatRepository;
  /** Room creations per user per hour (the store-backed window limiter). */
  createLimit: MessageThrottle;
  publish(event: ChatBusEvent): void;
  removeLocally(roomId: string, userId: string): void;
  /** Where history and room lists are read (a replica that has the caller's and the room's last change). */
  reads: ChatReads;
}

export function registerRoomRoutes(app: FastifyInstance, deps: RoomRoutesDeps): void {
  const { rooms, sessions, reads } = deps;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const guard = requireUser(sessions);
  const security = [{ session: [] }];
  const callerOf = (request: Parameters<typeof authOf>[0]): Caller => {
    const { user } = authOf(request);
    return { userId: user.id, isAdmin: user.role === 'admin' };
  };

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

  r.get(
    '/chat/rooms/:id/messages',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'History of a room by seq, oldest first',
        security,
        params: RoomParams,
        querystring: z
          .strictObject({
            before: seqParam.optional().describe('Messages with a seq below this (older)'),
            after: seqParam.optional().describe('Messages with a seq above this (newer)'),
            limit: z.coerce
              .number()
              .int()
              .min(1)
              .max(ChatLimits.HISTORY_PAGE_MAX)
              .default(ChatLimits.HISTORY_PAGE_DEFAULT),
          })
          .refine((q) => q.before === undefined || q.after === undefined, {
            message: 'before and after cannot be combined',
            path: ['after'],
          }),
        response: {
          200: z.object({
            messages: z.array(RoomMessageSchema),
            hasMore: z.boolean().describe('More messages exist beyond this page in the paging direction'),
          }),
          ...errors,
        },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      const { id } = request.params;
      // Membership on the primary, never a replica: a member removed a moment ago is refused at once, however far
      // behind the replica is. The position lookup (store) runs meanwhile.
      const [access, position] = await Promise.all([
        rooms.access(id, caller),
        reads.position({ users: [caller.userId], rooms: [id] }),
      ]);
      if (!access) fail({ error: 'not_found' });
      return reads.readAt(position, (db) => deps.repo.page(id, request.query, db));
    },
  );

  r.post(
    '/chat/rooms/:id/read',
    {
      preHandler: guard,
      schema: {
        tags: ['chat'],
        summary: 'Store my read position (a lower seq than the stored one changes nothing)',
        security,
        params: RoomParams,
        body: z.strictObject({ seq: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER) }),
        response: {
          200: z.object({ lastReadSeq: z.number().int().min(0), unreadCount: z.number().int().min(0) }),
          ...errors,
        },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      const { id } = request.params;
      const result = ok(await rooms.markRead(id, caller, request.body.seq));
      if (result.changed) {
        await reads.changed({ users: [caller.userId] });
        deps.publish({
          type: 'read',
          roomId: id,
          userId: caller.userId,
          seq: result.lastReadSeq,
          toAll: result.kind === 'direct' || result.kind === 'private',
        });
      }
      return { lastReadSeq: result.lastReadSeq, unreadCount: result.unreadCount };
    },
  );
}
