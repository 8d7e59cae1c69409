// One PostgreSQL database per test file, so files run in parallel without sharing state.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Database } from '../../src/infra/db.js';
import { TEST_PG_URL } from './env.js';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

async function admin<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: TEST_PG_URL });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

export async function createTestDatabase(): Promise<TestDatabase> {
  // The creation time (epoch seconds, base 36) in the name lets the global setup clean up only stale ones.
  const name = `herald_t_${Math.floor(Date.now() / 1000).toString(36)}_${randomBytes(5).toString('hex')}`;
  await admin((c) => c.query(`create database "${name}"`));
  const url = new URL(TEST_PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => admin((c) => c.query(`drop database if exists "${name}" with (force)`)).then(() => undefined),
  };
}

/**
 * A fresh database with Herald's migrations applied, the app's handle on it, and a plain pg pool for setup and
 * assertions in raw SQL. `close()` ends both and drops the database.
 */
export async function createMigratedDatabase(poolSize = 2): Promise<{
  database: Database;
  pool: pg.Pool;
  /** Inserts verified users by id (name = id, email `<id>@x.test`), optionally banned until `banExpires`. */
  insertUser(id: string, ban?: { banned: boolean; banExpires?: Date | null }): Promise<void>;
  close(): Promise<void>;
}> {
  // Loaded here, not at the top: the global setup imports this module without needing the app's code.
  const { createDatabase } = await import('../../src/infra/db.js');
  const testDb = await createTestDatabase();
  const database = await createDatabase({ databaseUrl: testDb.url, dataDir: '' });
  await database.migrate();
  const pool = new pg.Pool({ connectionString: testDb.url, max: poolSize });
  // The database is dropped with force at the end: a client still ending then must not be an uncaught error.
  pool.on('error', () => {});
  return {
    database,
    pool,
    async insertUser(id, ban) {
      await pool.query(
        `insert into "user" (id, name, email, email_verified, banned, ban_expires)
           values ($1, $1, $1 || '@x.test', true, $2, $3)`,
        [id, ban?.banned ?? false, ban?.banExpires ?? null],
      );
    },
    async close() {
      await pool.end();
      await database.close();
      await testDb.drop();
    },
  };
}
