// Owns every query on chat_message and chat_room_event: storing a message with its room seq and revision (one
// statement, under the room row's lock), edits and deletions recorded as room events, the replay a resume reads,
// history per room, and the §6 history of `general` (keyset on (created_at, seq), as before rooms existed).
import { randomUUID } from 'node:crypto';
import { and, desc, eq, lt, or, type SQL, sql } from 'drizzle-orm';
import type { EventOutbox } from '../events/outbox.js';
import type { Db } from '../infra/db.js';
import { rowsOf } from '../infra/db.js';
import { chatMessage } from '../infra/schema/chat.js';
import { type ChatMessage, GENERAL_ROOM_ID, legacyMessage, type RoomMessage } from './protocol.js';

type Row = typeof chatMessage.$inferSelect;

// clock_timestamp, not now(): a send that waited for the room's lock gets the time it was stored, so created_at
// follows seq within a room as closely as the clock allows.
const NOW_MS = sql`date_trunc('milliseconds', clock_timestamp())`;

declare module '../events/outbox.js' {
  interface DomainEventMap {
    'chat.message.created': RoomMessage;
  }
}

export function toRoomMessage(row: Row): RoomMessage {
  const message: RoomMessage = {
    id: row.id,
    roomId: row.roomId,
    seq: row.seq,
    userId: row.userId,
    userName: row.userName,
    userAvatar: row.userAvatar ?? null,
    message: row.message,
    createdAt: row.createdAt.toISOString(),
  };
  if (row.editedAt) message.editedAt = row.editedAt.toISOString();
  if (row.clientMessageId !== null) message.clientMessageId = row.clientMessageId;
  return message;
}

export function toChatMessage(row: Row): ChatMessage {
  return legacyMessage(toRoomMessage(row));
}

/** A raw row of chat_message as returned by `select *` through db.execute (snake_case, strings for bigint). */
interface RawRow {
  id: string;
  room_id: string;
  seq: string | number;
  rev: string | number;
  user_id: string;
  user_name: string;
  user_avatar: string | null;
  message: string;
  client_message_id: string | null;
  created_at: string | Date;
  edited_at: string | Date | null;
}

const toDate = (v: string | Date) => (v instanceof Date ? v : new Date(v));
function fromRaw(r: RawRow): Row {
  return {
    id: r.id,
    roomId: r.room_id,
    seq: Number(r.seq),
    rev: Number(r.rev),
    userId: r.user_id,
    userName: r.user_name,
    userAvatar: r.user_avatar,
    message: r.message,
    clientMessageId: r.client_message_id,
    createdAt: toDate(r.created_at),
    editedAt: r.edited_at === null ? null : toDate(r.edited_at),
  };
}

export interface NewChatMessage {
  roomId?: string;
  userId: string;
  userName: string;
  userAvatar: string | null;
  message: string;
  clientMessageId?: string;
}

export interface Actor {
  userId: string;
  isAdmin: boolean;
}

/** A stored change of a room: the message, the room revision it took and the room's members version then. */
export interface Stored {
  message: RoomMessage;
  rev: number;
  mv: number;
}

export type Mutation<T> = { ok: true; value: T } | { ok: false; reason: 'not_found' | 'forbidden' };

export type InsertResult =
  | ({ ok: true; created: boolean; roomKind?: string } & Stored)
  | { ok: false; reason: 'not_found' };

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

export interface ChatRepository {
  /**
   * Stores a message in a room the author may write to (`general`, or a room they are a member of); with a
   * clientMessageId already used by this user, returns the stored one instead (created: false).
   */
  insert(input: NewChatMessage): Promise<InsertResult>;
  update(id: string, text: string, actor: Actor, roomId?: string): Promise<Mutation<Stored>>;
  remove(id: string, actor: Actor, roomId?: string): Promise<Mutation<Stored>>;
  /** Deletes every message of the user in every room, each deletion a room event; the rooms' new revisions. */
  purgeUser(userId: string): Promise<{ deletedCount: number; rooms: Array<{ roomId: string; rev: number }> }>;
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

export function createChatRepository(db: Db, events?: Pick<EventOutbox, 'write' | 'wants'>): ChatRepository {
  const newestFirst = [desc(chatMessage.createdAt), desc(chatMessage.seq)];
  const inGeneral = eq(chatMessage.roomId, GENERAL_ROOM_ID);
  // Distinguishes "no such message" from "not yours" only after the fast path (one statement) missed.
  const missReason = async (id: string, roomId: string): Promise<'not_found' | 'forbidden'> => {
    const found = await db
      .select({ id: chatMessage.id })
      .from(chatMessage)
      .where(and(eq(chatMessage.id, id), eq(chatMessage.roomId, roomId)))
      .limit(1);
    return found.length > 0 ? 'forbidden' : 'not_found';
  };
  /** Members of the room may change it; `general` has every member; admins may change any message. */
  const mayChange = (actor: Actor) =>
    actor.isAdmin
      ? sql`true`
      : sql`m.user_id = ${actor.userId} and (m.room_id = ${GENERAL_ROOM_ID} or exists (
          select 1 from chat_member cm where cm.room_id = m.room_id and cm.user_id = ${actor.userId}))`;

  /**
   * One statement: the room row is locked (FOR UPDATE) while the next seq and revision are read from it, the
   * message inserted and the room moved on. A clientMessageId conflict inserts nothing and moves nothing, so
   * seqs stay contiguous; concurrent senders on any instance queue on the room's row.
   */
  const insertStatement = (input: NewChatMessage, roomId: string) => sql`
    with r as (
      select id, kind, last_seq, last_rev, members_version from chat_room
      where id = ${roomId} and (kind = 'general' or exists (
        select 1 from chat_member cm where cm.room_id = ${roomId} and cm.user_id = ${input.userId}))
      for update
    ), m as (
      insert into chat_message (room_id, seq, rev, user_id, user_name, user_avatar, message, client_message_id, created_at)
      select r.id, r.last_seq + 1, r.last_rev + 1, ${input.userId}, ${input.userName}, ${input.userAvatar},
             ${input.message}, ${input.clientMessageId ?? null}, ${NOW_MS}
      from r
      on conflict (user_id, client_message_id) do nothing
      returning *
    ), u as (
      update chat_room set last_seq = m.seq, last_rev = m.rev, last_message_at = m.created_at
      from m where chat_room.id = m.room_id
      returning chat_room.members_version
    )
    select m.*, u.members_version as mv, r.kind as room_kind from m, u, r`;

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

  type RawInsert = RawRow & { mv: string | number; room_kind: string };
  const stored = (raw: RawInsert): InsertResult => {
    const row = fromRaw(raw);
    return {
      ok: true,
      created: true,
      message: toRoomMessage(row),
      rev: row.rev,
      mv: Number(raw.mv),
      roomKind: raw.room_kind,
    };
  };
  const wantsWebhook = () => events?.wants('chat.message.created') === true;
  const enqueueCreated = async (tx: Parameters<Parameters<Db['transaction']>[0]>[0], rows: RawInsert[]) => {
    if (rows.length === 0 || !events) return;
    await events.write(
      tx,
      rows.map((raw) => {
        const row = fromRaw(raw);
        return { type: 'chat.message.created' as const, data: toRoomMessage(row), at: row.createdAt };
      }),
    );
  };
  /** Nothing inserted: a clientMessageId used before (the stored message), or a room the author cannot write to. */
  const notInserted = async (input: NewChatMessage): Promise<InsertResult> => {
    if (input.clientMessageId !== undefined) {
      const existing = await db
        .select()
        .from(chatMessage)
        .where(
          and(eq(chatMessage.userId, input.userId), eq(chatMessage.clientMessageId, input.clientMessageId)),
        )
        .limit(1);
      const found = existing[0];
      if (found) return { ok: true, created: false, message: toRoomMessage(found), rev: found.rev, mv: 0 };
    }
    return { ok: false, reason: 'not_found' };
  };

  const insertOne = async (input: NewChatMessage, roomId: string): Promise<InsertResult> => {
    const run = async (exec: Pick<Db, 'execute'>) =>
      rowsOf<RawInsert>(await exec.execute(insertStatement(input, roomId)));
    // With a subscriber, the chat.message.created event is queued in the insert's transaction; without one,
    // the insert stays a single statement.
    const inserted = wantsWebhook()
      ? await db.transaction(async (tx) => {
          const rows = await run(tx);
          await enqueueCreated(tx, rows);
          return rows;
        })
      : await run(db);
    const raw = inserted[0];
    return raw ? stored(raw) : notInserted(input);
  };

  /**
   * Several messages of one room in one statement, numbered in arrival order. Ids are chosen here so each result
   * finds its request. A row that conflicts (a clientMessageId stored meanwhile) would leave a hole in the
   * numbering: then the transaction is rolled back and the batch goes one by one.
   */
  class BatchConflict extends Error {}
  const insertMany = async (roomId: string, inputs: NewChatMessage[]): Promise<InsertResult[]> => {
    const ids = inputs.map(() => randomUUID());
    const values = sql.join(
      inputs.map(
        (input, i) =>
          sql`(${i}::int, ${ids[i]}::uuid, ${input.userId}, ${input.userName}, ${input.userAvatar}, ${input.message}, ${input.clientMessageId ?? null})`,
      ),
      sql`, `,
    );
    const statement = sql`
      with r as (
        select id, kind, last_seq, last_rev, members_version from chat_room where id = ${roomId} for update
      ), v (ord, id, user_id, user_name, user_avatar, message, client_message_id) as (values ${values}),
      ok as (
        select v.*, row_number() over (order by v.ord) as k from v, r
        where r.kind = 'general' or exists (
          select 1 from chat_member cm where cm.room_id = r.id and cm.user_id = v.user_id)
      ), m as (
        insert into chat_message (id, room_id, seq, rev, user_id, user_name, user_avatar, message, client_message_id, created_at)
        select ok.id, r.id, r.last_seq + ok.k, r.last_rev + ok.k, ok.user_id, ok.user_name, ok.user_avatar,
               ok.message, ok.client_message_id, ${NOW_MS}
        from ok, r
        on conflict (user_id, client_message_id) do nothing
        returning *
      ), u as (
        update chat_room set last_seq = (select max(seq) from m), last_rev = (select max(rev) from m),
          last_message_at = (select max(created_at) from m)
        where id = ${roomId} and exists (select 1 from m)
        returning members_version
      )
      select m.*, u.members_version as mv, r.kind as room_kind, (select count(*)::int from ok) as expected
      from m, u, r`;
    let rows: Array<RawInsert & { expected: number }>;
    try {
      rows = await db.transaction(async (tx) => {
        const got = rowsOf<RawInsert & { expected: number }>(await tx.execute(statement));
        if (got.length === 0 || got.length !== Number(got[0]?.expected)) throw new BatchConflict();
        if (wantsWebhook()) await enqueueCreated(tx, got);
        return got;
      });
    } catch (err) {
      if (!(err instanceof BatchConflict)) throw err;
      const one: InsertResult[] = [];
      for (const input of inputs) one.push(await insertOne(input, roomId));
      return one;
    }
    const byId = new Map(rows.map((r) => [r.id, r]));
    return Promise.all(
      inputs.map((input, i) => {
        const raw = byId.get(ids[i] as string);
        return raw ? stored(raw) : notInserted(input);
      }),
    );
  };

  interface Waiting {
    input: NewChatMessage;
    resolve: (r: InsertResult) => void;
    reject: (e: unknown) => void;
  }
  const inFlight = new Set<string>();
  const waiting = new Map<string, Waiting[]>();
  const BATCH_MAX = 50;
  const drain = (roomId: string) => {
    const queue = waiting.get(roomId);
    if (!queue || queue.length === 0) {
      waiting.delete(roomId);
      inFlight.delete(roomId);
      return;
    }
    const batch = queue.splice(0, BATCH_MAX);
    const run =
      batch.length === 1
        ? insertOne((batch[0] as Waiting).input, roomId).then((r) => [r])
        : insertMany(
            roomId,
            batch.map((w) => w.input),
          );
    run
      .then(
        (results) => {
          batch.forEach((w, i) => {
            w.resolve(results[i] as InsertResult);
          });
        },
        (err: unknown) => {
          for (const w of batch) w.reject(err);
        },
      )
      .finally(() => drain(roomId));
  };

  return {
    insert(input) {
      const roomId = input.roomId ?? GENERAL_ROOM_ID;
      // A send that arrives while this instance already has one in flight for the room waits for it and then
      // goes with the others that waited, in one statement: writers of a room queue on its row anyway, so
      // under load one lock and one commit serve a batch instead of one message each.
      if (!inFlight.has(roomId)) {
        inFlight.add(roomId);
        return insertOne(input, roomId).finally(() => drain(roomId));
      }
      return new Promise<InsertResult>((resolve, reject) => {
        let queue = waiting.get(roomId);
        if (!queue) {
          queue = [];
          waiting.set(roomId, queue);
        }
        queue.push({ input, resolve, reject });
      });
    },

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
      const head = (await this.head(roomId)) ?? { lastSeq: 0, lastRev: 0, membersVersion: 0 };
      const rows = await db
        .select()
        .from(chatMessage)
        .where(and(eq(chatMessage.roomId, roomId), sql`${chatMessage.rev} <= ${head.lastRev}`))
        .orderBy(desc(chatMessage.seq))
        .limit(limit);
      return { messages: rows.reverse().map(toRoomMessage), head };
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

    async head(roomId) {
      const rows = rowsOf<{
        last_seq: string | number;
        last_rev: string | number;
        members_version: string | number;
      }>(
        await db.execute(sql`select last_seq, last_rev, members_version from chat_room where id = ${roomId}`),
      );
      const row = rows[0];
      return row
        ? {
            lastSeq: Number(row.last_seq),
            lastRev: Number(row.last_rev),
            membersVersion: Number(row.members_version),
          }
        : null;
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
