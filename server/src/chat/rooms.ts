// Owns rooms and membership (§6.1), one module per seam (rooms/): the access rule every path applies and the
// room views and lists (views.ts: a private or direct room is invisible to non-members), room creation with the
// one direct room per pair (creation.ts), membership changes under the room's lock with the limits
// (membership.ts, member-writes.ts), and members with their read positions (members.ts). This module only
// combines them into the one handle the feature passes around.
import type { Db } from '../infra/db.js';
import { createRoomCreation, type RoomCreation } from './rooms/creation.js';
import { createRoomMembers, type RoomMembers } from './rooms/members.js';
import { createRoomMembership, type RoomMembership } from './rooms/membership.js';
import type { RoomLimits } from './rooms/model.js';
import { createRoomViews, type RoomViews } from './rooms/views.js';

export type {
  Caller,
  MemberRole,
  Room,
  RoomAccess,
  RoomError,
  RoomKind,
  RoomLimits,
  RoomMember,
} from './rooms/model.js';

export interface RoomsRepository extends RoomViews, RoomMembers, RoomCreation, RoomMembership {}

export function createRoomsRepository(db: Db, limits: RoomLimits): RoomsRepository {
  const views = createRoomViews(db);
  return {
    ...views,
    ...createRoomMembers(db, views),
    ...createRoomCreation(db, limits, views),
    ...createRoomMembership(db, limits, views),
  };
}
