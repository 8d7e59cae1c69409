// The HTTP shapes of the room routes (§6.1) and the mapping of the rooms repository's refusals to HTTP errors.
import { z } from 'zod';
import { AppError, forbidden, httpError, notFound } from '../../http/errors.js';
import { ErrorSchema, noNul } from '../../http/schemas.js';
import { ChatLimits, RoomIdSchema } from '../protocol.js';
import type { RoomError } from '../rooms.js';

export const NO_NUL = { message: 'must not contain NUL (U+0000) characters' };
export const UserIdSchema = z.string().min(1).max(255).refine(noNul, NO_NUL);

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

export const RoomParams = z.strictObject({ id: RoomIdSchema });
export const seqParam = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const errors = {
  400: ErrorSchema,
  401: ErrorSchema,
  403: ErrorSchema,
  404: ErrorSchema,
  409: ErrorSchema,
};

export function fail(e: RoomError): never {
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

/** The value, or the HTTP error of the refusal it is. */
export const ok = <T>(value: T | RoomError): T => {
  if (typeof value === 'object' && value !== null && 'error' in value) fail(value as RoomError);
  return value as T;
};
