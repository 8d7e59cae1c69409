// A room's messages over HTTP: its history by seq (membership checked on the primary) and my read position.
import { z } from 'zod';
import { ChatLimits, RoomMessageSchema } from '../protocol.js';
import type { RoomRouteKit } from './kit.js';
import { errors, fail, ok, RoomParams, seqParam } from './schemas.js';

export function registerRoomMessageRoutes({ r, guard, security, callerOf, deps }: RoomRouteKit): void {
  const { rooms, reads } = deps;

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
