// What every room route shares: its dependencies, the session guard, the OpenAPI security entry and the caller.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { authOf, requireUser, type SessionResolver } from '../../auth/guard.js';
import type { ChatBusEvent } from '../protocol.js';
import type { ChatReads } from '../reads.js';
import type { ChatRepository } from '../repository.js';
import type { Caller, RoomsRepository } from '../rooms.js';
import type { MessageThrottle } from '../throttle.js';

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

export function roomRouteKit(app: FastifyInstance, deps: RoomRoutesDeps) {
  return {
    deps,
    r: app.withTypeProvider<ZodTypeProvider>(),
    guard: requireUser(deps.sessions),
    security: [{ session: [] }],
    callerOf: (request: Parameters<typeof authOf>[0]): Caller => {
      const { user } = authOf(request);
      return { userId: user.id, isAdmin: user.role === 'admin' };
    },
  };
}

export type RoomRouteKit = ReturnType<typeof roomRouteKit>;
