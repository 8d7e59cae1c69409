// Drops databases left behind by interrupted earlier runs (each test file creates its own). Only databases
// created more than an hour ago (the time is in the name) and not in use are dropped, so a run never removes a
// database another concurrent run (or a benchmark) has just created and not yet connected to.
import pg from 'pg';
import { TEST_PG_URL } from './env.js';

const STALE_AFTER_S = 60 * 60;

/** Creation time (epoch seconds) encoded by createTestDatabase, or null for names of another shape. */
export function createdAtOf(datname: string): number | null {
  const match = /^herald_t_([0-9a-z]+)_[0-9a-f]+$/.exec(datname);
  return match?.[1] ? Number.parseInt(match[1], 36) : null;
}

export default async function setup(): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_PG_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>(
      "select datname from pg_database where datname like 'herald_t_%' and datname not in (select datname from pg_stat_activity where datname is not null)",
    );
    const now = Date.now() / 1000;
    for (const { datname } of rows) {
      const createdAt = createdAtOf(datname);
      // Names of the older shape (no time) are leftovers of earlier versions: always stale.
      if (createdAt !== null && now - createdAt < STALE_AFTER_S) continue;
      await client.query(`drop database if exists "${datname}"`);
    }
  } finally {
    await client.end();
  }
}
