// Drops databases left behind by interrupted earlier runs (each test file creates its own).
import pg from 'pg';
import { TEST_PG_URL } from './env.js';

export default async function setup(): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_PG_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>(
      "select datname from pg_database where datname like 'herald_t_%' and datname not in (select datname from pg_stat_activity where datname is not null)",
    );
    for (const { datname } of rows) await client.query(`drop database if exists "${datname}"`);
  } finally {
    await client.end();
  }
}
