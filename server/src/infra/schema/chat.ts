// Tables owned by the chat feature.
import { bigint, index, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { user } from './auth.js';

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const chatMessage = pgTable(
  'chat_message',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    seq: bigint('seq', { mode: 'number' }).generatedAlwaysAsIdentity().notNull(),
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
    // History orders by `created_at desc, seq desc` (NULLS FIRST): the index says the same so it can serve it.
    index('chat_message_created_desc_idx').on(t.createdAt.desc().nullsFirst(), t.seq.desc().nullsFirst()),
    index('chat_message_seq_idx').on(t.seq),
    index('chat_message_user_idx').on(t.userId),
    uniqueIndex('chat_message_client_id_uq').on(t.userId, t.clientMessageId),
  ],
);
