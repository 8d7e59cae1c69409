// Owns every query on chat_message and chat_room_event, one module per seam (repository/): the send path's inserts
// (insert.ts: seq and revision under the room row's lock, batched per room), edits, deletions and purges recorded
// as room events (changes.ts), and the reads: history per room, the room's head and the replay a resume reads
// (history.ts). This module only combines them into the one handle the feature passes around.
import type { EventOutbox } from '../events/outbox.js';
import type { Db } from '../infra/db.js';
import { createMessageChanges, type MessageChanges } from './repository/changes.js';
import { createMessageHistory, type MessageHistory } from './repository/history.js';
import { createMessageInserts, type MessageInserts } from './repository/insert.js';

export type { Actor, Mutation } from './repository/changes.js';
export type { HistoryCursor, ReplayEvent, RoomHead } from './repository/history.js';
export type { InsertResult, NewChatMessage } from './repository/insert.js';
export { type Stored, toChatMessage, toRoomMessage } from './repository/rows.js';

export interface ChatRepository extends MessageInserts, MessageChanges, MessageHistory {}

export function createChatRepository(db: Db, events?: Pick<EventOutbox, 'write' | 'wants'>): ChatRepository {
  return { ...createMessageInserts(db, events), ...createMessageChanges(db), ...createMessageHistory(db) };
}
