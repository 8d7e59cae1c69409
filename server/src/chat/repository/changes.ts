// Edits and deletions of stored messages, each recorded as a room event with the room's next revision (one
// statement), and the purge of a user's messages in every room.
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../../infra/db.js';
import { rowsOf } from '../../infra/db.js';
import { chatMessage } from '../../infra/schema/chat.js';
import { GENERAL_ROOM_ID } from '../protocol.js';
import { fromRaw, NOW_MS, type RawRow, type Stored, toRoomMessage } from './rows.js';

export interface Actor {
  userId: string;
  isAdmin: boolean;
}

export type Mutation<T> = { ok: true; value: T } | { ok: false; reason: 'not_found' | 'forbidden' };

export interface MessageChanges {
  update(id: string, text: string, actor: Actor, roomId?: string): Promise<Mutation<Stored>>;
  remove(id: string, actor: Actor, roomId?: string): Promise<Mutation<Stored>>;
  /** Deletes every message of the user in every room, each deletion a room event; the rooms' new revisions. */
  purgeUser(userId: string): Promise<{ deletedCount: number; rooms: Array<{ roomId: string; rev: number }> }>;
}

/** Members of the room may change it; `general` has every member; admins may change any message. */
const mayChange = (actor: Actor) =>
  actor.isAdmin
    ? sql`true`
    : sql`m.user_id = ${actor.userId} and (m.room_id = ${GENERAL_ROOM_ID} or exists (
          select 1 from chat_member cm where cm.room_id = m.room_id and cm.user_id = ${actor.userId}))`;

const changeStatement = (
  kind: 'updated' | 'deleted',
  id: string,
  actor: Actor,
  roomId: string,
  text?: string,
) => {
  const m =
    kind === 'updated'
      ? sql`update chat_message m set message = ${text ?? ''}, edited_at = ${NOW_MS}
              where m.id = ${id} and m.room_id = ${roomId} and ${mayChange(actor)} returning m.*`
      : sql`delete from chat_message m where m.id = ${id} and m.room_id = ${roomId} and ${mayChange(actor)}
              returning m.*`;
  return sql`
      with m as (${m}),
      r as (
        update chat_room set last_rev = last_rev + 1 from m where chat_room.id = m.room_id
        returning chat_room.last_rev as ev_rev, chat_room.members_version as mv
      ), e as (
        insert into chat_room_event (room_id, rev, kind, seq, message_id)
        select m.room_id, r.ev_rev, ${kind}, m.seq, m.id from m, r
      )
      select m.*, r.ev_rev, r.mv from m, r`;
};

export function createMessageChanges(db: Db): MessageChanges {
  // Distinguishes "no such message" from "not yours" only after the fast path (one statement) missed.
  const missReason = async (id: string, roomId: string): Promise<'not_found' | 'forbidden'> => {
    const found = await db
      .select({ id: chatMessage.id })
      .from(chatMessage)
      .where(and(eq(chatMessage.id, id), eq(chatMessage.roomId, roomId)))
      .limit(1);
    return found.length > 0 ? 'forbidden' : 'not_found';
  };

  const change = async (
    kind: 'updated' | 'deleted',
    id: string,
    actor: Actor,
    roomId: string,
    text?: string,
  ): Promise<Mutation<Stored>> => {
    const rows = rowsOf<RawRow & { ev_rev: string | number; mv: string | number }>(
      await db.execute(changeStatement(kind, id, actor, roomId, text)),
    );
    const row = rows[0];
    if (row) {
      return {
        ok: true,
        value: { message: toRoomMessage(fromRaw(row)), rev: Number(row.ev_rev), mv: Number(row.mv) },
      };
    }
    return { ok: false, reason: await missReason(id, roomId) };
  };

  return {
    update: (id, text, actor, roomId = GENERAL_ROOM_ID) => change('updated', id, actor, roomId, text),
    remove: (id, actor, roomId = GENERAL_ROOM_ID) => change('deleted', id, actor, roomId),

    async purgeUser(userId) {
      // One statement: delete, count per room, move each room's revision by its count, record one deletion event
      // per message numbered within that range (in seq order).
      const result = await db.execute(sql`
        with d as (delete from chat_message where user_id = ${userId} returning room_id, seq, id),
        c as (select room_id, count(*)::bigint as n from d group by room_id),
        u as (
          update chat_room r set last_rev = r.last_rev + c.n from c where r.id = c.room_id
          returning r.id, r.last_rev, c.n
        ), e as (
          insert into chat_room_event (room_id, rev, kind, seq, message_id)
          select d.room_id, u.last_rev - u.n + row_number() over (partition by d.room_id order by d.seq),
                 'deleted', d.seq, d.id
          from d join u on u.id = d.room_id
        )
        select u.id as room_id, u.last_rev as rev, u.n from u`);
      const rows = rowsOf<{ room_id: string; rev: string | number; n: string | number }>(result);
      return {
        deletedCount: rows.reduce((sum, r) => sum + Number(r.n), 0),
        rooms: rows.map((r) => ({ roomId: r.room_id, rev: Number(r.rev) })),
      };
    },
  };
}
