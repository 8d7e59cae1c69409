// Owns the HTTP routes of rooms and direct messages (§6.1), one module per seam (rooms-routes/): the directory
// (listing, creating, one room), membership (join, members, the one direct room per pair) and a room's messages
// (history by seq, the read position). Every route needs a session; a private or direct room the caller is not
// a member of answers 404 NOT_FOUND, exactly as a missing one. Registered in the order the OpenAPI document
// lists them.
import type { FastifyInstance } from 'fastify';
import { registerRoomDirectoryRoutes } from './rooms-routes/directory.js';
import { type RoomRoutesDeps, roomRouteKit } from './rooms-routes/kit.js';
import { registerRoomMemberRoutes } from './rooms-routes/members.js';
import { registerRoomMessageRoutes } from './rooms-routes/messages.js';

export type { RoomRoutesDeps } from './rooms-routes/kit.js';
export { MemberSchema, RoomSchema } from './rooms-routes/schemas.js';

export function registerRoomRoutes(app: FastifyInstance, deps: RoomRoutesDeps): void {
  const kit = roomRouteKit(app, deps);
  registerRoomDirectoryRoutes(kit);
  registerRoomMemberRoutes(kit);
  registerRoomMessageRoutes(kit);
}
