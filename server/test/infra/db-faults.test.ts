// The pool wrapper (infra/db.ts) when PostgreSQL drops connections: a backend terminated while its client is
// checked out (mid-transaction) must fail that transaction with an error the HTTP layer maps to 503, never emit
// an unhandled 'error' event (which would end the process), and the pool must serve the next query on a fresh
// connection. Also: every connection carries the instance's application_name.
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Database, isDatabaseUnavailable, rowsOf } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

describe('database pool under killed connections', () => {
  let target: TestDatabase;
  let database: Database;
  let admin: pg.Client;
  const warnings: string[] = [];
  const logger = {
    info: () => {},
    warn: (_obj: unknown, msg?: string) => {
      warnings.push(String(msg));
    },
  };
  const appName = `herald:pool-test-${process.pid}`;

  beforeAll(async () => {
    target = await createTestDatabase();
    database = await createDatabase({
      databaseUrl: target.url,
      dataDir: '/tmp/unused',
      poolSize: 3,
      applicationName: appName,
      // biome-ignore lint/suspicious/noExplicitAny: a two-method logger stands in for pino here
      logger: logger as any,
    });
    admin = new pg.Client({ connectionString: target.url });
    await admin.connect();
  });
  afterAll(async () => {
    await database?.close();
    await admin?.end();
    await target?.drop();
  });

  it('names its connections after the instance', async () => {
    const [row] = rowsOf<{ name: string }>(
      await database.db.execute(sql`select current_setting('application_name') as name`),
    );
    expect(row?.name).toBe(appName);
  });

  it('a backend killed mid-transaction fails the transaction (503-class error), not the process', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const outcome = await database.db
        .transaction(async (tx) => {
          const [me] = rowsOf<{ pid: number }>(await tx.execute(sql`select pg_backend_pid() as pid`));
          // Killed while this client is checked out and idle in the transaction: the driver reports it on the
          // client object itself, outside any query.
          await admin.query('select pg_terminate_backend($1)', [me?.pid]);
          await new Promise((resolve) => setTimeout(resolve, 300));
          await tx.execute(sql`select 1`);
          return 'committed';
        })
        .catch((err: unknown) => err);
      expect(outcome).toBeInstanceOf(Error);
      expect(isDatabaseUnavailable(outcome)).toBe(true);
      expect(uncaught).toEqual([]);
      expect(warnings).toContain('database connection lost (client in use)');
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    // The pool recovers by itself: the broken client was discarded.
    await expect(database.ping()).resolves.toBeUndefined();
  });

  it('idle connections killed in bulk: the next queries reconnect', async () => {
    await Promise.all([1, 2, 3].map(() => database.ping()));
    const killed = await admin.query(
      `select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1`,
      [appName],
    );
    expect(killed.rowCount).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (let i = 0; i < 5; i++) await expect(database.ping()).resolves.toBeUndefined();
  });

  it('classifies connection failures as unavailable and query errors as not', () => {
    const terminated = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    });
    expect(isDatabaseUnavailable(terminated)).toBe(true);
    expect(isDatabaseUnavailable(new Error('Failed query: select 1', { cause: terminated }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '08006' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('dup'), { code: '23505' }))).toBe(false);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable('57P01')).toBe(false);
  });
});
