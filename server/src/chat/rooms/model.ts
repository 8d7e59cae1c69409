// The shapes of rooms and membership (§6.1) that the rooms repository's parts share and return.
export type RoomKind = 'general' | 'public' | 'private' | 'direct';
export type MemberRole = 'owner' | 'member';

export interface Room {
  id: string;
  kind: RoomKind;
  name: string;
  createdBy: string | null;
  createdAt: string;
  memberCount: number;
  lastSeq: number;
  lastMessageAt: string | null;
  role?: MemberRole;
  lastReadSeq?: number;
  unreadCount?: number;
}

export interface RoomMember {
  userId: string;
  name: string;
  role: MemberRole;
  lastReadSeq: number;
}

/** What a caller may do with a room: null when it is invisible to them (missing, or private/direct and not theirs). */
export interface RoomAccess {
  id: string;
  kind: RoomKind;
  role: MemberRole | null;
  /** May read (history, subscribe): general, public, or a member (admins: any room). */
  canRead: boolean;
  /** May write: a member (general: everyone). */
  canWrite: boolean;
}

export interface Caller {
  userId: string;
  isAdmin: boolean;
}

export type RoomError =
  | { error: 'not_found' }
  | { error: 'forbidden'; message: string }
  | { error: 'room_limit'; userIds: string[] }
  | { error: 'room_full' }
  | { error: 'user_not_found'; userIds: string[] }
  | { error: 'invalid'; message: string };

export interface RoomLimits {
  roomsPerUser: number;
  membersPerPrivateRoom: number;
}
