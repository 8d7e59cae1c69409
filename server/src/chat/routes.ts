// Owns the chat feature's HTTP routes: GET /chat without an upgrade (426, documents the socket), history paging
// and the administrator's purge of one user's messages.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf, requireAdmin, requireUser, type SessionResolver } from '../auth/guard.js';
import { AppError } from '../http/errors.js';
import { ErrorSchema, noNul } from '../http/schemas.js';
import { ChatErrorCode, ChatLimits, ChatMessageSchema, GENERAL_ROOM_ID } from './protocol.js';
import type { ChatReads } from './reads.js';
import type { ChatRepository, HistoryCursor } from './repository.js';

// PostgreSQL timestamps start at 0001-01-01 (no year 0 on input) and the ISO form stops at 9999; a cursor outside
// would make the query fail. Older than the earliest instant is an empty page; later than the latest is "all".
const EARLIEST_CURSOR_MS = Date.parse('0001-01-01T00:00:00.000Z');
const LATEST_CURSOR_MS = Date.parse('9999-12-31T23:59:59.999Z');

const HistoryQuery = z.strictObject({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(ChatLimits.HISTORY_PAGE_MAX)
    .default(ChatLimits.HISTORY_PAGE_DEFAULT)
    .describe('Page size, 1–100 (default 50)'),
  before: z
    .union([z.guid(), z.iso.datetime({ offset: true })])
    .optional()
    .describe(
      'Return messages strictly older than this: a message id (exact keyset on createdAt then sequence) or an ISO 8601 timestamp',
    ),
});

export interface ChatRoutesDeps {
  repo: ChatRepository;
  sessions: SessionResolver;
  /** After a purge: the count, and each room's revision after its deletions (instances catch up to it). */
  onPurged(userId: string, deletedCount: number, rooms: Array<{ roomId: string; rev: number }>): void;
  /** Where history is read (a replica that has the caller's and general's last change). */
  reads: ChatReads;
}

export function registerChatRoutes(app: FastifyInstance, deps: ChatRoutesDeps): void {
  const { sessions } = deps;
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.get(
    '/chat',
    {
      schema: {
        tags: ['chat'],
        summary: 'Chat WebSocket endpoint (upgrade only)',
        // Guests may connect; the session cookie, when sent, makes the socket a member's.
        security: [{}, { session: [] }],
        description:
          'Open with a WebSocket client: `Origin` must be allowlisted, the session cookie (if any) makes a member. ' +
          'The protocol is described in docs/chat-protocol.md. A plain HTTP request gets 426.',
        response: { 426: ErrorSchema },
      },
    },
    async (_request, reply) =>
      reply
        .code(426)
        .header('upgrade', 'websocket')
        .send({ code: 'UPGRADE_REQUIRED', message: 'Connect to /chat with a WebSocket client' }),
  );

  r.get(
    '/chat/history',
    {
      preHandler: requireUser(sessions),
      schema: {
        tags: ['chat'],
        summary: 'Page older chat messages (oldest first)',
        security: [{ session: [] }],
        querystring: HistoryQuery,
        response: {
          200: z
            .object({ messages: z.array(ChatMessageSchema) })
            .describe('Up to `limit` messages, oldest first'),
          400: ErrorSchema,
          401: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request) => {
      const { limit, before } = request.query;
      const scope = { users: [authOf(request).user.id], rooms: [GENERAL_ROOM_ID] };
      if (before === undefined)
        return { messages: await deps.reads.read(scope, (db) => deps.repo.recent(limit, db)) };
      let cursor: HistoryCursor;
      if (z.guid().safeParse(before).success) cursor = { kind: 'id', id: before };
      else {
        const at = Date.parse(before);
        if (at < EARLIEST_CURSOR_MS) return { messages: [] };
        cursor = { kind: 'time', at: new Date(Math.min(at, LATEST_CURSOR_MS)) };
      }
      const messages = await deps.reads.read(scope, (db) => deps.repo.before(cursor, limit, db));
      if (!messages)
        throw new AppError(
          404,
          ChatErrorCode.MESSAGE_NOT_FOUND,
          'No message with this id; page with its createdAt instead',
        );
      return { messages };
    },
  );

  r.delete(
    '/admin/users/:id/messages',
    {
      preHandler: requireAdmin(sessions),
      schema: {
        tags: ['chat', 'admin'],
        summary:
          'Delete every chat message of a user, in every room, and tell every client (messages_purged)',
        security: [{ session: [] }],
        params: z.strictObject({
          id: z
            .string()
            .min(1)
            .max(255)
            .refine(noNul, { message: 'must not contain NUL (U+0000) characters' }),
        }),
        response: {
          200: z
            .object({ deletedCount: z.number().int().min(0) })
            .meta({ example: { deletedCount: 12 } })
            .describe('How many messages were deleted'),
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
        },
      },
    },
    async (request) => {
      const admin = authOf(request).user.id;
      const { deletedCount, rooms } = await deps.repo.purgeUser(request.params.id);
      if (deletedCount > 0) {
        await deps.reads.changed({ users: [admin], rooms: rooms.map((r) => r.roomId) });
        deps.onPurged(request.params.id, deletedCount, rooms);
      }
      return { deletedCount };
    },
  );
}
