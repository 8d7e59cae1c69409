// Tables owned by the chat feature (design: docs/architecture.md, "Chat rooms").
import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { user } from './auth.js';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * One row per room; `general` exists from the migration on. `last_seq` numbers messages (contiguous from 1),
 * `last_rev` orders every change of the room (a message created, edited or deleted) and is the resume cursor the
 * replay reads; both move only under this row's lock, in the transaction that stores the change.
 */
export const chatRoom = pgTable(
  'chat_room',
  {
    id: text('id').primaryKey(),
    kind: text('kind').notNull(),
    name: text('name').notNull(),
    createdBy: text('created_by').references(() => user.id, { onDelete: 'set null' }),
    createdAt: tz('created_at').notNull().defaultNow(),
    lastSeq: bigint('last_seq', { mode: 'number' }).notNull().default(0),
    lastRev: bigint('last_rev', { mode: 'number' }).notNull().default(0),
    lastMessageAt: tz('last_message_at'),
    memberCount: integer('member_count').notNull().default(0),
    /** Bumped by every removal: an instance delivering a message of a newer version re-checks its subscribers. */
    membersVersion: bigint('members_version', { mode: 'number' }).notNull().default(0),
    /** Direct rooms only: `<smaller user id>:<larger user id>`, unique, so a pair has one room. */
    directKey: text('direct_key'),
  },
  (t) => [
    uniqueIndex('chat_room_direct_key_uq').on(t.directKey),
    index('chat_room_public_idx').on(t.kind, t.lastMessageAt),
    check('chat_room_kind_ck', sql`${t.kind} in ('general', 'public', 'private', 'direct')`),
  ],
);

export const chatMember = pgTable(
  'chat_member',
  {
    roomId: text('room_id')
      .notNull()
      .references(() => chatRoom.id, { onDelete: 'cascade' }),
    userId: text('user_id')
      .notNull()
      .references(() => user.id, { onDelete: 'cascade' }),
    role: text('role').notNull().default('member'),
    lastReadSeq: bigint('last_read_seq', { mode: 'number' }).notNull().default(0),
    joinedAt: tz('joined_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.roomId, t.userId] }),
    index('chat_member_user_idx').on(t.userId),
    check('chat_member_role_ck', sql`${t.role} in ('owner', 'member')`),
  ],
);

export const chatMessage = pgTable(
  'chat_message',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    roomId: text('room_id')
      .notNull()
      .default('general')
      .references(() => chatRoom.id, { onDelete: 'cascade' }),
    /**
     * Per room, contiguous from 1. The chat repository assigns seq and rev in its insert statement; a row inserted
     * without them (0, the default) gets them from the trigger chat_message_assign_seq, under the same lock.
     */
    seq: bigint('seq', { mode: 'number' }).notNull().default(0),
    /** The room revision of this message's creation (see chat_room.last_rev). */
    rev: bigint('rev', { mode: 'number' }).notNull().default(0),
    userId: text('user_id')
      .notNull()
      .references(() => user.id, { onDelete: 'cascade' }),
    userName: text('user_name').notNull(),
    userAvatar: text('user_avatar'),
    message: text('message').notNull(),
    clientMessageId: text('client_message_id'),
    createdAt: tz('created_at').notNull().defaultNow(),
    editedAt: tz('edited_at'),
  },
  (t) => [
    uniqueIndex('chat_message_room_seq_uq').on(t.roomId, t.seq),
    index('chat_message_room_rev_idx').on(t.roomId, t.rev),
    // History orders by `created_at desc, seq desc` (NULLS FIRST): the index says the same so it can serve it.
    index('chat_message_room_created_idx').on(
      t.roomId,
      t.createdAt.desc().nullsFirst(),
      t.seq.desc().nullsFirst(),
    ),
    index('chat_message_user_idx').on(t.userId),
    uniqueIndex('chat_message_client_id_uq').on(t.userId, t.clientMessageId),
  ],
);

/**
 * Edits and deletions, each with its own room revision, so a resume replays them in order with the messages.
 * Creations are not repeated here: chat_message.rev orders them.
 */
export const chatRoomEvent = pgTable(
  'chat_room_event',
  {
    roomId: text('room_id')
      .notNull()
      .references(() => chatRoom.id, { onDelete: 'cascade' }),
    rev: bigint('rev', { mode: 'number' }).notNull(),
    kind: text('kind').notNull(),
    seq: bigint('seq', { mode: 'number' }).notNull(),
    messageId: uuid('message_id').notNull(),
    createdAt: tz('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.roomId, t.rev] }), index('chat_room_event_created_idx').on(t.createdAt)],
);
