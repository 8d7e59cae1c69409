// Reads of stored messages: the §6 history of `general` (keyset on (created_at, seq), as before rooms existed),
// pages of a room by seq, a room's head, and the replay of a room's changes by revision that a resume reads.
import { and, desc, eq, lt, or, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../infra/db.js';
import { rowsOf } from '../../infra/db.js';
import { chatMessage } from '../../infra/schema/chat.js';
import { type ChatMessage, GENERAL_ROOM_ID, type RoomMessage } from '../protocol.js';
import { fromRaw, type RawRow, toChatMessage, toRoomMessage } from './rows.js';

export type HistoryCursor = { kind: 'id'; id: string } | { kind: 'time'; at: Date };

/** One change of a room as a resume replays it. `message` is absent when the message is gone since. */
export interface ReplayEvent {
  rev: number;
  kind: 'created' | 'updated' | 'deleted';
  seq: number;
  messageId: string;
  message?: RoomMessage;
}

export interface RoomHead {
  lastSeq: number;
  lastRev: number;
  membersVersion: number;
}

export interface MessageHistory {
  /**
   * The newest `limit` messages of `general`, oldest first. `via`: where to read (a replica chosen by chat/reads.ts);
   * the primary when absent. The same for `before` and `page`.
   */
  recent(limit: number, via?: Db): Promise<ChatMessage[]>;
  /** `recent` with the room revision the snapshot reflects (read first, so nothing newer is claimed). */
  recentWithHead(limit: number, roomId?: string): Promise<{ messages: RoomMessage[]; head: RoomHead }>;
  /** Up to `limit` messages of `general` strictly older than the cursor, oldest first; null when an id cursor is unknown. */
  before(cursor: HistoryCursor, limit: number, via?: Db): Promise<ChatMessage[] | null>;
  /** A page of one room by seq, oldest first. */
  page(
    roomId: string,
    query: { before?: number; after?: number; limit: number },
    via?: Db,
  ): Promise<{ messages: RoomMessage[]; hasMore: boolean }>;
  head(roomId: string): Promise<RoomHead | null>;
  /** Changes with rev in (sinceRev, untilRev], in order, at most `limit`. */
  changes(roomId: string, sinceRev: number, untilRev: number, limit: number): Promise<ReplayEvent[]>;
  /**
   * The revision a client holding messages up to `seq` has seen at least (the creation of `seq`, or when it is
   * gone, the newest creation before it): a resume from a seq replays from there.
   */
  revAtSeq(roomId: string, seq: number): Promise<number>;
}

const newestFirst = [desc(chatMessage.createdAt), desc(chatMessage.seq)];
const inGeneral = eq(chatMessage.roomId, GENERAL_ROOM_ID);

export function createMessageHistory(db: Db): MessageHistory {
  const head = async (roomId: string): Promise<RoomHead | null> => {
    const rows = rowsOf<{
      last_seq: string | number;
      last_rev: string | number;
      members_version: string | number;
    }>(await db.execute(sql`select last_seq, last_rev, members_version from chat_room where id = ${roomId}`));
    const row = rows[0];
    return row
      ? {
          lastSeq: Number(row.last_seq),
          lastRev: Number(row.last_rev),
          membersVersion: Number(row.members_version),
        }
      : null;
  };

  return {
    head,

    async recent(limit, via = db) {
      const rows = await via
        .select()
        .from(chatMessage)
        .where(inGeneral)
        .orderBy(...newestFirst)
        .limit(limit);
      return rows.reverse().map(toChatMessage);
    },

    async recentWithHead(limit, roomId = GENERAL_ROOM_ID) {
      // The head first: every change up to it is committed, so the page below contains them all (and perhaps
      // newer ones, which the live path then skips by rev).
      const at = (await head(roomId)) ?? { lastSeq: 0, lastRev: 0, membersVersion: 0 };
      const rows = await db
        .select()
        .from(chatMessage)
        .where(and(eq(chatMessage.roomId, roomId), sql`${chatMessage.rev} <= ${at.lastRev}`))
        .orderBy(desc(chatMessage.seq))
        .limit(limit);
      return { messages: rows.reverse().map(toRoomMessage), head: at };
    },

    async before(cursor, limit, via = db) {
      let where: SQL | undefined;
      if (cursor.kind === 'id') {
        const anchor = await via
          .select({ createdAt: chatMessage.createdAt, seq: chatMessage.seq })
          .from(chatMessage)
          .where(and(eq(chatMessage.id, cursor.id), inGeneral))
          .limit(1);
        const a = anchor[0];
        if (!a) return null;
        where = or(
          lt(chatMessage.createdAt, a.createdAt),
          and(eq(chatMessage.createdAt, a.createdAt), lt(chatMessage.seq, a.seq)),
        );
      } else {
        where = lt(chatMessage.createdAt, cursor.at);
      }
      const rows = await via
        .select()
        .from(chatMessage)
        .where(and(inGeneral, where))
        .orderBy(...newestFirst)
        .limit(limit);
      return rows.reverse().map(toChatMessage);
    },

    async page(roomId, { before, after, limit }, via = db) {
      const inRoom = eq(chatMessage.roomId, roomId);
      if (after !== undefined) {
        const rows = await via
          .select()
          .from(chatMessage)
          .where(and(inRoom, sql`${chatMessage.seq} > ${after}`))
          .orderBy(chatMessage.seq)
          .limit(limit + 1);
        return { messages: rows.slice(0, limit).map(toRoomMessage), hasMore: rows.length > limit };
      }
      const rows = await via
        .select()
        .from(chatMessage)
        .where(before === undefined ? inRoom : and(inRoom, sql`${chatMessage.seq} < ${before}`))
        .orderBy(desc(chatMessage.seq))
        .limit(limit + 1);
      return { messages: rows.slice(0, limit).reverse().map(toRoomMessage), hasMore: rows.length > limit };
    },

    async changes(roomId, sinceRev, untilRev, limit) {
      if (untilRev <= sinceRev) return [];
      const rows = rowsOf<
        RawRow & { ev_rev: string | number; ev_kind: string; ev_seq: string | number; ev_id: string }
      >(
        await db.execute(sql`
          select * from (
            select m.rev as ev_rev, 'created' as ev_kind, m.seq as ev_seq, m.id as ev_id, m.*
            from chat_message m
            where m.room_id = ${roomId} and m.rev > ${sinceRev} and m.rev <= ${untilRev}
            union all
            select e.rev, e.kind, e.seq, e.message_id, m.*
            from chat_room_event e left join chat_message m on m.id = e.message_id
            where e.room_id = ${roomId} and e.rev > ${sinceRev} and e.rev <= ${untilRev}
          ) x order by ev_rev limit ${limit}`),
      );
      return rows.map((r) => {
        const event: ReplayEvent = {
          rev: Number(r.ev_rev),
          kind: r.ev_kind as ReplayEvent['kind'],
          seq: Number(r.ev_seq),
          messageId: r.ev_id,
        };
        if (r.id !== null) event.message = toRoomMessage(fromRaw(r));
        return event;
      });
    },

    async revAtSeq(roomId, seq) {
      if (seq <= 0) return 0;
      const rows = rowsOf<{ rev: string | number | null }>(
        await db.execute(sql`
          select coalesce(
            (select rev from chat_message where room_id = ${roomId} and seq = ${seq}),
            (select max(rev) from chat_message where room_id = ${roomId} and seq < ${seq}),
            0) as rev`),
      );
      return Number(rows[0]?.rev ?? 0);
    },
  };
}
