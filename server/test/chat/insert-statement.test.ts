// A chat message's insert is one named prepared statement (infra/prepared-statements.ts: planning it cost
// PostgreSQL twice what running it did), and still numbers messages in order; with a webhook subscriber it runs in
// a transaction with the domain event, unnamed.
import { drizzle } from 'drizzle-orm/node-postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChatRepository } from '../../src/chat/repository.js';
import type { Db } from '../../src/infra/db.js';
import * as schema from '../../src/infra/schema/index.js';
import { createMigratedDatabase } from '../helpers/db.js';

let db: Awaited<ReturnType<typeof createMigratedDatabase>>;
let onOneConnection: Db;

const statements = async () =>
  (await db.pool.query<{ name: string }>('select name from pg_prepared_statements')).rows.map((r) => r.name);

beforeAll(async () => {
  // One connection: the prepared statements it holds are the ones the repository left there.
  db = await createMigratedDatabase(1);
  await db.insertUser('writer');
  onOneConnection = drizzle(db.pool, { schema, casing: 'snake_case' }) as unknown as Db;
});

afterAll(async () => {
  await db?.close();
});

const message = (text: string, clientMessageId?: string) => ({
  roomId: 'general',
  userId: 'writer',
  userName: 'Writer',
  userAvatar: null,
  message: text,
  ...(clientMessageId ? { clientMessageId } : {}),
});

describe('the chat insert statement', () => {
  it('is one named statement however many messages go through it, numbered in order', async () => {
    const repo = createChatRepository(onOneConnection);
    const seqs: number[] = [];
    for (const text of ['one', 'two', 'three']) {
      const result = await repo.insert(message(text));
      if (!result.ok) throw new Error('not stored');
      seqs.push(result.message.seq);
    }
    expect(seqs[1]).toBe((seqs[0] ?? 0) + 1);
    expect(seqs[2]).toBe((seqs[0] ?? 0) + 2);
    const names = await statements();
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^herald_/);
    // A retried clientMessageId still answers with the stored message (nothing inserted by the named statement).
    const first = await repo.insert(message('four', 'c-1'));
    const again = await repo.insert(message('four', 'c-1'));
    expect(again.ok && first.ok && again.created === false && again.message.id === first.message.id).toBe(
      true,
    );
  });

  it('runs in a transaction with the domain event when a webhook wants it', async () => {
    const written: unknown[] = [];
    const repo = createChatRepository(onOneConnection, {
      wants: () => true,
      write: async (_tx, events) => {
        written.push(...events);
        return events.length;
      },
    });
    await db.pool.query('deallocate all');
    const result = await repo.insert(message('five'));
    expect(result.ok).toBe(true);
    expect(written).toHaveLength(1);
    expect(await statements()).toEqual([]);
  });
});
