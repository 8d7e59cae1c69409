// Owns every query on chat_message. Ordering is keyset on (created_at, seq): created_at is stored at
// millisecond precision so that the ISO timestamps clients see page exactly, and seq breaks ties.
import { and, desc, eq, lt, or, type SQL, sql } from 'drizzle-orm';
import type { EventOutbox } from '../events/outbox.js';
import type { Db } from '../infra/db.js';
import { rowsOf } from '../infra/db.js';
import { chatMessage } from '../infra/schema/chat.js';
import type { ChatMessage } from './protocol.js';

type Row = typeof chatMessage.$inferSelect;

const NOW_MS = sql`date_trunc('milliseconds', now())`;

declare module '../events/outbox.js' {
  interface DomainEventMap {
    'chat.message.created': ChatMessage;
  }
}

export function toChatMessage(row: Row): ChatMessage {
  const message: ChatMessage = {
    id: row.id,
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

export interface NewChatMessage {
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

export type Mutation<T> = { ok: true; value: T } | { ok: false; reason: 'not_found' | 'forbidden' };

export type HistoryCursor = { kind: 'id'; id: string } | { kind: 'time'; at: Date };

export interface ChatRepository {
  /** Stores a message; with a clientMessageId already used by this user, returns the stored one instead. */
  insert(input: NewChatMessage): Promise<{ message: ChatMessage; created: boolean }>;
  update(id: string, text: string, actor: Actor): Promise<Mutation<ChatMessage>>;
  remove(id: string, actor: Actor): Promise<Mutation<string>>;
  purgeUser(userId: string): Promise<number>;
  /** The newest `limit` messages, oldest first. */
  recent(limit: number): Promise<ChatMessage[]>;
  /** Up to `limit` messages strictly older than the cursor, oldest first; null when an id cursor is unknown. */
  before(cursor: HistoryCursor, limit: number): Promise<ChatMessage[] | null>;
}

export function createChatRepository(db: Db, events?: Pick<EventOutbox, 'write' | 'wants'>): ChatRepository {
  const newestFirst = [desc(chatMessage.createdAt), desc(chatMessage.seq)];
  const ownedBy = (id: string, actor: Actor): SQL | undefined =>
    actor.isAdmin
      ? eq(chatMessage.id, id)
      : and(eq(chatMessage.id, id), eq(chatMessage.userId, actor.userId));
  // Distinguishes "no such message" from "not yours" only after the fast path (one statement) missed.
  const missReason = async (id: string): Promise<'not_found' | 'forbidden'> => {
    const found = await db
      .select({ id: chatMessage.id })
      .from(chatMessage)
      .where(eq(chatMessage.id, id))
      .limit(1);
    return found.length > 0 ? 'forbidden' : 'not_found';
  };

  return {
    async insert(input) {
      const insertRow = (exec: Pick<Db, 'insert'>) =>
        exec
          .insert(chatMessage)
          .values({
            userId: input.userId,
            userName: input.userName,
            userAvatar: input.userAvatar,
            message: input.message,
            clientMessageId: input.clientMessageId ?? null,
            createdAt: NOW_MS,
          })
          .onConflictDoNothing({ target: [chatMessage.userId, chatMessage.clientMessageId] })
          .returning();
      // With a subscriber, the chat.message.created event is queued in the insert's transaction; without one,
      // the insert stays a single statement.
      const inserted =
        events?.wants('chat.message.created') === true
          ? await db.transaction(async (tx) => {
              const rows = await insertRow(tx);
              const stored = rows[0];
              if (stored) {
                const message = toChatMessage(stored);
                await events.write(tx, [
                  { type: 'chat.message.created', data: message, at: stored.createdAt },
                ]);
              }
              return rows;
            })
          : await insertRow(db);
      const row = inserted[0];
      if (row) return { message: toChatMessage(row), created: true };
      if (input.clientMessageId === undefined) throw new Error('chat message insert returned no row');
      const existing = await db
        .select()
        .from(chatMessage)
        .where(
          and(eq(chatMessage.userId, input.userId), eq(chatMessage.clientMessageId, input.clientMessageId)),
        )
        .limit(1);
      const found = existing[0];
      if (!found) throw new Error('chat message conflict without a stored row');
      return { message: toChatMessage(found), created: false };
    },

    async update(id, text, actor) {
      const rows = await db
        .update(chatMessage)
        .set({ message: text, editedAt: NOW_MS })
        .where(ownedBy(id, actor))
        .returning();
      const row = rows[0];
      if (row) return { ok: true, value: toChatMessage(row) };
      return { ok: false, reason: await missReason(id) };
    },

    async remove(id, actor) {
      const rows = await db.delete(chatMessage).where(ownedBy(id, actor)).returning({ id: chatMessage.id });
      const row = rows[0];
      if (row) return { ok: true, value: row.id };
      return { ok: false, reason: await missReason(id) };
    },

    async purgeUser(userId) {
      // Counting inside the statement avoids shipping every deleted id back to the application.
      const result = await db.execute(
        sql`with d as (delete from ${chatMessage} where ${chatMessage.userId} = ${userId} returning 1)
            select count(*)::int as n from d`,
      );
      return rowsOf<{ n: number }>(result)[0]?.n ?? 0;
    },

    async recent(limit) {
      const rows = await db
        .select()
        .from(chatMessage)
        .orderBy(...newestFirst)
        .limit(limit);
      return rows.reverse().map(toChatMessage);
    },

    async before(cursor, limit) {
      let where: SQL | undefined;
      if (cursor.kind === 'id') {
        const anchor = await db
          .select({ createdAt: chatMessage.createdAt, seq: chatMessage.seq })
          .from(chatMessage)
          .where(eq(chatMessage.id, cursor.id))
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
      const rows = await db
        .select()
        .from(chatMessage)
        .where(where)
        .orderBy(...newestFirst)
        .limit(limit);
      return rows.reverse().map(toChatMessage);
    },
  };
}
