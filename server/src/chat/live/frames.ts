// A room change as records and frames: built from a replayed row or a bus event, encoded once per form (§6.1,
// and §6 for `general`) and shared by every socket that receives it.
import { encode, legacyMessage, type RoomChange, type ServerEvent } from '../protocol.js';
import type { ReplayEvent } from '../repository.js';
import type { Change, Sub } from './types.js';

export function changeFromReplay(e: ReplayEvent): Change {
  const c: Change = { rev: e.rev, mv: 0, kind: e.kind, seq: e.seq, messageId: e.messageId };
  if (e.message) c.message = e.message;
  return c;
}

export function changeFromEvent(event: RoomChange): Change {
  return event.type === 'message_deleted'
    ? { rev: event.rev, mv: event.mv, kind: 'deleted', seq: event.seq, messageId: event.messageId }
    : {
        rev: event.rev,
        mv: event.mv,
        kind: event.type === 'new_message' ? 'created' : 'updated',
        seq: event.message.seq,
        messageId: event.message.id,
        message: event.message,
      };
}

/** The frame of a change in §6.1 form (null: nothing to send, e.g. a creation replayed after its deletion). */
export function v2Frame(roomId: string, c: Change): Buffer | null {
  if (c.v2 !== undefined) return c.v2;
  let event: ServerEvent | null = null;
  if (c.kind === 'deleted') {
    event = { type: 'message_deleted', roomId, messageId: c.messageId, seq: c.seq, rev: c.rev };
  } else if (c.message) {
    event = {
      type: c.kind === 'created' ? 'new_message' : 'message_updated',
      roomId,
      message: c.message,
      rev: c.rev,
    };
  }
  c.v2 = event ? encode(event) : null;
  return c.v2;
}

/** The §6 frame of a change of `general`. */
export function legacyFrame(c: Change): Buffer | null {
  if (c.legacy !== undefined) return c.legacy;
  let event: ServerEvent | null = null;
  if (c.kind === 'deleted') event = { type: 'message_deleted', messageId: c.messageId };
  else if (c.message) {
    event = {
      type: c.kind === 'created' ? 'new_message' : 'message_updated',
      message: legacyMessage(c.message),
    };
  }
  c.legacy = event ? encode(event) : null;
  return c.legacy;
}

export const frameFor = (roomId: string, sub: Sub, c: Change) =>
  sub.legacy ? legacyFrame(c) : v2Frame(roomId, c);
