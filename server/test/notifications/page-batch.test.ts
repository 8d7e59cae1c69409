// List pages sharing statements (notifications/page-batch.ts). The queueing rules with statements the test answers
// itself (when each statement goes out is the point), then the repository against the real PostgreSQL: pages read
// together answer exactly what each page read alone answers, over users, filters, types, limits, pages past the end,
// deep pages and search, while the statements are fewer than the pages.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPageBatcher, type PageKey, type PageResult } from '../../src/notifications/page-batch.js';
import { createNotificationRepository } from '../../src/notifications/repository.js';
import type { ListQuery } from '../../src/notifications/schemas.js';
import { createMigratedDatabase } from '../helpers/db.js';

interface Call {
  kind: 'one' | 'many';
  shape: string;
  keys: PageKey[];
  answer(results: PageResult<string>[]): void;
  fail(err: unknown): void;
}

/** A batcher whose statements wait until the test answers them. */
function controlled(maxInFlight = 1, maxBatch = 64) {
  const calls: Call[] = [];
  const via = {};
  const batcher = createPageBatcher<object, string>({
    maxInFlight,
    maxBatch,
    one: (_via, shape, key) =>
      new Promise((resolve, reject) =>
        calls.push({
          kind: 'one',
          shape,
          keys: [key],
          answer: (r) => resolve(r[0] as PageResult<string>),
          fail: reject,
        }),
      ),
    many: (_via, shape, keys) =>
      new Promise((resolve, reject) =>
        calls.push({ kind: 'many', shape, keys, answer: resolve, fail: reject }),
      ),
  });
  const page = (userId: string, offset = 0, shape = 'all:all') =>
    batcher.page(via, shape, { userId, type: null, offset, limit: 20 });
  const resultFor = (k: PageKey): PageResult<string> => ({
    rows: [`${k.userId}@${k.offset}`],
    totalCount: k.offset,
  });
  const answer = (call: Call | undefined) => call?.answer(call.keys.map(resultFor));
  return { calls, page, answer, batcher, via };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('page batcher', () => {
  it('sends a page alone when nothing runs, and the pages that queue meanwhile together', async () => {
    const b = controlled(1);
    const first = b.page('u1');
    await turn();
    expect(b.calls.map((c) => c.kind)).toEqual(['one']);
    const queued = [b.page('u2'), b.page('u3'), b.page('u4', 20)];
    await turn();
    // One statement runs (maxInFlight 1): the others wait for it.
    expect(b.calls).toHaveLength(1);
    b.answer(b.calls[0]);
    expect(await first).toEqual({ rows: ['u1@0'], totalCount: 0 });
    expect(b.calls).toHaveLength(2);
    expect(b.calls[1]?.kind).toBe('many');
    expect(b.calls[1]?.keys.map((k) => k.userId)).toEqual(['u2', 'u3', 'u4']);
    b.answer(b.calls[1]);
    expect(await Promise.all(queued)).toEqual([
      { rows: ['u2@0'], totalCount: 0 },
      { rows: ['u3@0'], totalCount: 0 },
      { rows: ['u4@20'], totalCount: 20 },
    ]);
  });

  it('reads equal pages queued together once, and never joins a statement already sent', async () => {
    const b = controlled(1);
    const running = b.page('u1');
    await turn();
    // The same page as the running statement's: it must not take that statement's answer (read before it came).
    const again = [b.page('u1'), b.page('u1'), b.page('u2')];
    await turn();
    b.answer(b.calls[0]);
    await running;
    expect(b.calls[1]?.keys.map((k) => k.userId)).toEqual(['u1', 'u2']);
    b.answer(b.calls[1]);
    const [x, y, z] = await Promise.all(again);
    expect(x).toEqual({ rows: ['u1@0'], totalCount: 0 });
    expect(y).toBe(x);
    expect(z).toEqual({ rows: ['u2@0'], totalCount: 0 });
  });

  it('keeps shapes apart, runs up to maxInFlight statements, and caps a statement at maxBatch pages', async () => {
    const b = controlled(2, 2);
    const pages = [
      b.page('a', 0, 'unread:all'),
      b.page('b', 0, 'all:all'),
      b.page('c', 0, 'all:all'),
      b.page('d', 0, 'all:all'),
      b.page('e', 0, 'unread:all'),
    ];
    await turn();
    // Two statements at once, the oldest shape first, at most two pages each.
    expect(b.calls.map((c) => [c.shape, c.keys.map((k) => k.userId)])).toEqual([
      ['unread:all', ['a', 'e']],
      ['all:all', ['b', 'c']],
    ]);
    b.answer(b.calls[0]);
    await turn();
    expect(b.calls[2]?.keys.map((k) => k.userId)).toEqual(['d']);
    expect(b.calls[2]?.kind).toBe('one');
    b.answer(b.calls[1]);
    b.answer(b.calls[2]);
    expect((await Promise.all(pages)).map((p) => p.rows[0])).toEqual(['a@0', 'b@0', 'c@0', 'd@0', 'e@0']);
  });

  it('a failed statement fails exactly its pages, and the queue goes on', async () => {
    const b = controlled(1);
    const first = b.page('u1');
    await turn();
    const second = [b.page('u2'), b.page('u3')];
    await turn();
    b.calls[0]?.fail(new Error('connection terminated'));
    await expect(first).rejects.toThrow('connection terminated');
    b.calls[1]?.fail(new Error('statement timeout'));
    await expect(Promise.all(second)).rejects.toThrow('statement timeout');
    const third = b.page('u4');
    await turn();
    b.answer(b.calls[2]);
    expect(await third).toEqual({ rows: ['u4@0'], totalCount: 0 });
  });

  it('executors have lanes of their own', async () => {
    const calls: string[] = [];
    const batcher = createPageBatcher<{ name: string }, string>({
      maxInFlight: 1,
      maxBatch: 64,
      one: async (via, _shape, key) => {
        calls.push(`${via.name}:${key.userId}`);
        return { rows: [], totalCount: 0 };
      },
      many: async (via, _shape, keys) => {
        calls.push(`${via.name}:${keys.map((k) => k.userId).join('+')}`);
        return keys.map(() => ({ rows: [], totalCount: 0 }));
      },
    });
    const primary = { name: 'primary' };
    const replica = { name: 'replica' };
    const key = (userId: string) => ({ userId, type: null, offset: 0, limit: 20 });
    await Promise.all([
      batcher.page(primary, 'all:all', key('a')),
      batcher.page(replica, 'all:all', key('b')),
      batcher.page(primary, 'all:all', key('c')),
    ]);
    expect(calls.sort()).toEqual(['primary:a+c', 'replica:b']);
  });
});

describe('list pages read together (real PostgreSQL)', () => {
  let db: Awaited<ReturnType<typeof createMigratedDatabase>>;
  let repo: ReturnType<typeof createNotificationRepository>;
  const users = ['pb1', 'pb2', 'pb3', 'pb-empty'];
  const TYPES = ['info', 'mention', 'warning'] as const;

  beforeAll(async () => {
    db = await createMigratedDatabase();
    repo = createNotificationRepository(db.database.db, undefined, { listStatementsInFlight: 1 });
    for (const u of users) await db.insertUser(u);
    // pb1: 130 rows (deep pages exist), pb2: 45, pb3: 7; every third read, types rotating; a few in one instant
    // (ties broken by id); titles that a search finds.
    for (const [u, n] of [
      ['pb1', 130],
      ['pb2', 45],
      ['pb3', 7],
    ] as const) {
      await db.pool.query(
        `insert into notification (user_id, type, title, content, read, created_at, updated_at)
         select $1, ($2::text[])[1 + g % 3], case when g % 5 = 0 then 'Needle ' || g else 'Row ' || g end, 'c',
                g % 3 = 0, timestamptz '2026-01-01' + (g / 4) * interval '1 minute', now()
         from generate_series(1, $3::int) g`,
        [u, TYPES, n],
      );
    }
  });

  afterAll(async () => {
    await db?.close();
  });

  const queries: Array<[string, ListQuery]> = [];
  for (const u of users) {
    for (const filter of ['all', 'read', 'unread'] as const) {
      for (const page of [1, 2, 3, 7, 40]) {
        queries.push([u, { filter, page, limit: 20 }]);
        queries.push([u, { filter, page, limit: 7, type: 'mention' }]);
      }
      queries.push([u, { filter, page: 1, limit: 100 }]);
      queries.push([u, { filter, page: 2, limit: 5, search: 'needle' }]);
    }
  }

  it('answers every page as it answers it alone, in fewer statements than pages', async () => {
    // Alone: one at a time, so every page runs its own statement.
    const alone = [];
    for (const [u, q] of queries) alone.push(await repo.list(u, q));

    // The repository's own pool (node-postgres), every statement it is sent counted.
    const pool = (
      db.database.db as unknown as { $client: { query: (...args: unknown[]) => Promise<unknown> } }
    ).$client;
    const original = pool.query.bind(pool);
    let statements = 0;
    pool.query = (...args: unknown[]) => {
      statements++;
      return original(...args);
    };
    let together: Awaited<ReturnType<typeof repo.list>>[];
    try {
      together = await Promise.all(queries.map(([u, q]) => repo.list(u, q)));
    } finally {
      pool.query = original;
    }
    expect(together).toEqual(alone);
    expect(statements).toBeLessThan(queries.length / 2);

    // listBatchMax 0 (the benchmark's "a statement per page"): the same answers, one statement each.
    const unbatched = createNotificationRepository(db.database.db, undefined, { listBatchMax: 0 });
    statements = 0;
    pool.query = (...args: unknown[]) => {
      statements++;
      return original(...args);
    };
    try {
      expect(await Promise.all(queries.map(([u, q]) => unbatched.list(u, q)))).toEqual(alone);
    } finally {
      pool.query = original;
    }
    expect(statements).toBe(queries.length);
    // The answers are real pages, not all empty.
    expect(alone.filter((r) => r.rows.length > 0).length).toBeGreaterThan(queries.length / 3);
    expect(alone.some((r) => r.totalCount === 130)).toBe(true);
  });

  it('with the total known, reads the same rows and no count, alone and together', async () => {
    const counted = await Promise.all(queries.map(([u, q]) => repo.list(u, q)));
    // A planted total: the answer carries the caller's figure, not a count.
    const KNOWN = 4242;
    const expected = counted.map((r) => ({ rows: r.rows, totalCount: KNOWN }));
    const pool = (
      db.database.db as unknown as { $client: { query: (...args: unknown[]) => Promise<unknown> } }
    ).$client;
    const original = pool.query.bind(pool);
    const texts: string[] = [];
    pool.query = (...args: unknown[]) => {
      const [first] = args;
      texts.push(typeof first === 'string' ? first : String((first as { text?: unknown }).text));
      return original(...args);
    };
    const unbatched = createNotificationRepository(db.database.db, undefined, { listBatchMax: 0 });
    try {
      const alone = [];
      for (const [u, q] of queries) alone.push(await repo.list(u, q, undefined, KNOWN));
      expect(alone).toEqual(expected);
      expect(await Promise.all(queries.map(([u, q]) => repo.list(u, q, undefined, KNOWN)))).toEqual(expected);
      expect(await Promise.all(queries.map(([u, q]) => unbatched.list(u, q, undefined, KNOWN)))).toEqual(
        expected,
      );
    } finally {
      pool.query = original;
    }
    expect(texts.length).toBeGreaterThan(queries.length);
    expect(texts.filter((t) => /count\(/i.test(t))).toEqual([]);
    expect(expected.filter((r) => r.rows.length > 0).length).toBeGreaterThan(queries.length / 3);
  });

  it('a page read together reflects a change committed before it was asked for', async () => {
    const before = await repo.list('pb3', { filter: 'unread', page: 1, limit: 20 });
    const target = before.rows[0];
    if (!target) throw new Error('pb3 has no unread rows');
    const running = Promise.all(
      ['pb1', 'pb2'].map((u) => repo.list(u, { filter: 'unread', page: 1, limit: 20 })),
    );
    await repo.setRead('pb3', target.id, true);
    const [after] = await Promise.all([
      repo.list('pb3', { filter: 'unread', page: 1, limit: 20 }),
      repo.list('pb2', { filter: 'unread', page: 1, limit: 20 }),
      running,
    ]);
    expect(after.totalCount).toBe(before.totalCount - 1);
    expect(after.rows.map((r) => r.id)).not.toContain(target.id);
    await repo.setRead('pb3', target.id, false);
  });
});
