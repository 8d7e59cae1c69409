// SQL pieces the rooms repository's parts share: running a statement for its rows, and a room row with the
// caller's membership, unread count and (direct rooms) the other member's name.
import { sql } from 'drizzle-orm';
import { accountRelations } from '../../auth/accounts.js';
import type { Db } from '../../infra/db.js';
import { rowsOf } from '../../infra/db.js';
import { ChatLimits } from '../protocol.js';
import type { MemberRole, RoomKind } from './model.js';

export type Exec = Pick<Db, 'execute'>;

export interface RoomRow {
  id: string;
  kind: RoomKind;
  name: string;
  created_by: string | null;
  created_at: string | Date;
  member_count: number;
  last_seq: string | number;
  last_message_at: string | Date | null;
  role?: MemberRole | null;
  last_read_seq?: string | number | null;
  unread?: string | number | null;
  other_name?: string | null;
}

/** Runs a statement on `via` (a replica, a transaction) or the primary, for its rows. */
export const rowsFrom =
  (db: Db) =>
  async <T>(statement: ReturnType<typeof sql>, via: Exec = db) =>
    rowsOf<T>(await via.execute(statement));

export const unreadExpr = (userId: string) => sql`(select count(*)::int from (
      select 1 from chat_message m where m.room_id = r.id and m.seq > coalesce(cm.last_read_seq, 0)
        and m.user_id <> ${userId} limit ${ChatLimits.UNREAD_COUNT_CAP}) x)`;

// A direct room is named after the other member.
export const otherName = (userId: string) => sql`case when r.kind = 'direct' then (
      select u.name from chat_member o join ${accountRelations.profiles} u on u.id = o.user_id
      where o.room_id = r.id and o.user_id <> ${userId} limit 1) end`;
