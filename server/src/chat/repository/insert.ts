// The send path's storage: one statement numbers a message (seq, rev) under the room row's lock, and while one
// insert of a room is in flight on this instance the sends that arrive wait and go together in one multi-row
// statement. Writes the `chat.message.created` domain event in the insert's transaction when someone wants it.
import { randomUUID } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import type { EventOutbox } from '../../events/outbox.js';
import type { Db } from '../../infra/db.js';
import { rowsOf } from '../../infra/db.js';
import { preparedRows } from '../../infra/prepared-statements.js';
import { chatMessage } from '../../infra/schema/chat.js';
import { GENERAL_ROOM_ID, type RoomMessage } from '../protocol.js';
import { fromRaw, NOW_MS, type RawRow, type Stored, toRoomMessage } from './rows.js';

declare module '../../events/outbox.js' {
  interface DomainEventMap {
    'chat.message.created': RoomMessage;
  }
}

export interface NewChatMessage {
  roomId?: string;
  userId: string;
  userName: string;
  userAvatar: string | null;
  message: string;
  clientMessageId?: string;
}

export type InsertResult =
  | ({ ok: true; created: boolean; roomKind?: string } & Stored)
  | { ok: false; reason: 'not_found' };

export interface MessageInserts {
  /**
   * Stores a message in a room the author may write to (`general`, or a room they are a member of); with a
   * clientMessageId already used by this user, returns the stored one instead (created: false).
   */
  insert(input: NewChatMessage): Promise<InsertResult>;
}

type RawInsert = RawRow & { mv: string | number; room_kind: string };

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

/** Several messages of one room in one statement, numbered in arrival order (`ids` chosen by the caller). */
const insertManyStatement = (roomId: string, inputs: NewChatMessage[], ids: string[]) => {
  const values = sql.join(
    inputs.map(
      (input, i) =>
        sql`(${i}::int, ${ids[i]}::uuid, ${input.userId}, ${input.userName}, ${input.userAvatar}, ${input.message}, ${input.clientMessageId ?? null})`,
    ),
    sql`, `,
  );
  return sql`
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
};

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

/**
 * A row of a batch conflicted (a clientMessageId stored meanwhile): it would leave a hole in the numbering, so the
 * transaction is rolled back and the batch goes one by one.
 */
class BatchConflict extends Error {}

export function createMessageInserts(db: Db, events?: Pick<EventOutbox, 'write' | 'wants'>): MessageInserts {
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
    // With a subscriber, the chat.message.created event is queued in the insert's transaction; without one,
    // the insert stays a single statement, named: planning it cost PostgreSQL twice what running it did
    // (infra/prepared-statements.ts).
    const inserted = wantsWebhook()
      ? await db.transaction(async (tx) => {
          const rows = rowsOf<RawInsert>(await tx.execute(insertStatement(input, roomId)));
          await enqueueCreated(tx, rows);
          return rows;
        })
      : await preparedRows<RawInsert>(db, insertStatement(input, roomId));
    const raw = inserted[0];
    return raw ? stored(raw) : notInserted(input);
  };

  /** A batch of one room; ids are chosen here so each result finds its request. */
  const insertMany = async (roomId: string, inputs: NewChatMessage[]): Promise<InsertResult[]> => {
    const ids = inputs.map(() => randomUUID());
    const statement = insertManyStatement(roomId, inputs, ids);
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
  };
}
