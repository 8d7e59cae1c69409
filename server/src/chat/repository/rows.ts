// The row shapes of chat_message and their mapping to the protocol's message types, shared by the writes and the
// reads of the chat repository.
import { sql } from 'drizzle-orm';
import type { chatMessage } from '../../infra/schema/chat.js';
import { type ChatMessage, legacyMessage, type RoomMessage } from '../protocol.js';

export type Row = typeof chatMessage.$inferSelect;

// clock_timestamp, not now(): a send that waited for the room's lock gets the time it was stored, so created_at
// follows seq within a room as closely as the clock allows.
export const NOW_MS = sql`date_trunc('milliseconds', clock_timestamp())`;

/** A stored change of a room: the message, the room revision it took and the room's members version then. */
export interface Stored {
  message: RoomMessage;
  rev: number;
  mv: number;
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
export interface RawRow {
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
export function fromRaw(r: RawRow): Row {
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
