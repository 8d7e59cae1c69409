// One PostgreSQL database per test file, so files run in parallel without sharing state.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
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
