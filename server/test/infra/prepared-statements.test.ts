// Named prepared statements for the hot reads (infra/prepared-statements.ts): the same rows as Drizzle's unnamed
// statement, one statement per connection however the parameters change, and a read that still answers when the
// server connection does not hold the statement (a pooler moved the client), already holds one of that name, or
// a migration changed the columns it returns.
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/infra/db.js';
import { preparedRows, preparedStatementsEnabled } from '../../src/infra/prepared-statements.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { PGBOUNCER_BIN, startPgBouncer, type TestPgBouncer } from '../helpers/pgbouncer.js';

interface Row {
  id: number;
  at: string;
  label: string;
}

let testDb: TestDatabase;
const pools: pg.Pool[] = [];

function poolOf(url: string, max = 1): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => {});
  pools.push(pool);
  return pool;
}

const upTo = (n: number) => sql`select id, at, label from t where id <= ${n} order by id`;

async function statementsOn(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    'select name from pg_prepared_statements order by name',
  );
  return rows.map((r) => r.name);
}

beforeAll(async () => {
  testDb = await createTestDatabase();
  const setup = poolOf(testDb.url);
  await setup.query(`create table t (id int primary key, at timestamptz not null, label text not null)`);
  await setup.query(
    `insert into t select g, timestamptz '2026-11-27 09:00:00.123456+00' + g * interval '1 minute', 'row ' || g
       from generate_series(1, 10) g`,
  );
});

afterAll(async () => {
  for (const pool of pools) await pool.end();
  await testDb?.drop();
});

describe('prepared reads', () => {
  it('answer with the rows Drizzle returns, as one named statement per connection whatever the parameters', async () => {
    const pool = poolOf(testDb.url);
    const db = drizzle(pool, { casing: 'snake_case' });
    const viaDrizzle = rowsOf<Row>(await db.execute(upTo(3)));
    const named = await preparedRows<Row>(db, upTo(3));
    expect(named).toEqual(viaDrizzle);
    // Timestamps stay PostgreSQL's text, as Drizzle leaves them (the row mappers format them).
    expect(named[0]?.at).toBe('2026-11-27 09:01:00.123456+00');
    const names = await statementsOn(pool);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^herald_[0-9a-f]{32}$/);
    expect((await preparedRows<Row>(db, upTo(7))).map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(await statementsOn(pool)).toEqual(names);
    expect(preparedStatementsEnabled(db)).toBe(true);
  });

  it('still answer when the connection lost the statement, and run unnamed from then on', async () => {
    const pool = poolOf(testDb.url);
    const db = drizzle(pool, { casing: 'snake_case' });
    await preparedRows<Row>(db, upTo(2));
    // What a pooler handing the client another server connection looks like to the driver: it still believes the
    // statement is parsed and sends only Bind, which PostgreSQL refuses (26000).
    await pool.query('deallocate all');
    expect((await preparedRows<Row>(db, upTo(4))).map((r) => r.id)).toEqual([1, 2, 3, 4]);
    expect(preparedStatementsEnabled(db)).toBe(false);
    await preparedRows<Row>(db, upTo(5));
    expect(await statementsOn(pool)).toEqual([]);
  });

  it('still answer when the connection already holds a statement of that name (42P05)', async () => {
    const first = poolOf(testDb.url);
    await preparedRows<Row>(drizzle(first, { casing: 'snake_case' }), upTo(1));
    const [name] = await statementsOn(first);
    const pool = poolOf(testDb.url);
    await pool.query(`prepare ${name} as select 1`);
    const db = drizzle(pool, { casing: 'snake_case' });
    expect((await preparedRows<Row>(db, upTo(3))).map((r) => r.id)).toEqual([1, 2, 3]);
    expect(preparedStatementsEnabled(db)).toBe(false);
  });

  it('still answer when a migration changed what a prepared statement returns', async () => {
    const pool = poolOf(testDb.url);
    await pool.query('create table wide (id int primary key)');
    await pool.query('insert into wide values (1)');
    const db = drizzle(pool, { casing: 'snake_case' });
    const all = sql`select * from wide where id = ${1}`;
    expect(await preparedRows(db, all)).toEqual([{ id: 1 }]);
    // What a rolling upgrade's migration does under a running instance: PostgreSQL then refuses the cached plan.
    await pool.query(`alter table wide add column label text not null default 'x'`);
    expect(await preparedRows(db, all)).toEqual([{ id: 1, label: 'x' }]);
    expect(preparedStatementsEnabled(db)).toBe(false);
  });

  it('run unnamed on an executor that is not a node-postgres pool (a transaction)', async () => {
    const db = drizzle(poolOf(testDb.url), { casing: 'snake_case' });
    const rows = await db.transaction(async (tx) => {
      expect(preparedStatementsEnabled(tx)).toBe(false);
      return preparedRows<Row>(tx, upTo(2));
    });
    expect(rows.map((r) => r.id)).toEqual([1, 2]);
  });

  describe.skipIf(!PGBOUNCER_BIN)('through PgBouncer in transaction mode (no start-up detection)', () => {
    let bouncer: TestPgBouncer;
    beforeAll(async () => {
      bouncer = await startPgBouncer({ poolSize: 2 });
    });
    afterAll(async () => {
      await bouncer?.close();
    });

    it('every read answers correctly while clients move between server connections', async () => {
      const db = drizzle(poolOf(bouncer.urlFor(testDb.url), 6), { casing: 'snake_case' });
      for (let round = 0; round < 5; round++) {
        const results = await Promise.all(
          Array.from({ length: 12 }, (_, i) => preparedRows<Row>(db, upTo(1 + ((i + round) % 10)))),
        );
        results.forEach((rows, i) => {
          const n = 1 + ((i + round) % 10);
          expect(rows.map((r) => r.id)).toEqual(Array.from({ length: n }, (_, k) => k + 1));
        });
      }
    });
  });
});
