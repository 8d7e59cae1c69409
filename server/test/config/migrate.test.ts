// Migrations run under a PostgreSQL advisory lock: several instances (or CLI runs) migrating one fresh database
// at once all succeed and apply each migration exactly once.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createDatabase, MIGRATIONS_FOLDER } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { PGBOUNCER_BIN, PGBOUNCER_MODE, startPgBouncer } from '../helpers/pgbouncer.js';

const SERVER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const migrationFiles = readdirSync(MIGRATIONS_FOLDER).filter((f) => f.endsWith('.sql'));

async function appliedMigrations(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      'select count(*) as n from drizzle.__drizzle_migrations',
    );
    return Number(rows[0]?.n);
  } finally {
    await client.end();
  }
}

describe('migrations', () => {
  const dbs: TestDatabase[] = [];
  afterAll(() => Promise.all(dbs.map((d) => d.drop())));

  const concurrentMigrators = async (through: 'server' | 'pgbouncer', direct: boolean) => {
    const target = await createTestDatabase();
    dbs.push(target);
    const bouncer = through === 'pgbouncer' ? await startPgBouncer({ poolSize: 2 }) : undefined;
    const databases = await Promise.all(
      [1, 2, 3].map(() =>
        createDatabase({
          databaseUrl: bouncer ? bouncer.urlFor(target.url) : target.url,
          ...(bouncer && direct ? { directUrl: target.url } : {}),
          dataDir: '/tmp/unused',
          poolSize: 2,
          statementTimeoutMs: 10_000,
        }),
      ),
    );
    try {
      const results = await Promise.allSettled(databases.map((d) => d.migrate()));
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    } finally {
      await Promise.all(databases.map((d) => d.close()));
      await bouncer?.close();
    }
    expect(await appliedMigrations(target.url)).toBe(migrationFiles.length);
  };

  it('three concurrent migrators on one fresh database all succeed', () =>
    concurrentMigrators(PGBOUNCER_MODE ? 'pgbouncer' : 'server', true));

  // The lock is transaction-level and the migrations run inside that transaction: a transaction-mode pooler cannot
  // hand the lock's session to someone else, so DATABASE_DIRECT_URL is optional.
  it.skipIf(!PGBOUNCER_BIN)(
    'three concurrent migrators through PgBouncer (transaction pooling, no direct URL) all succeed',
    () => concurrentMigrators('pgbouncer', false),
  );

  it('npm run db:migrate (cli migrate) applies migrations and is idempotent', async () => {
    const target = await createTestDatabase();
    dbs.push(target);
    const run = async () => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'migrate'], {
        cwd: SERVER_DIR,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          DATABASE_URL: target.url,
          DATA_DIR: '/tmp/herald-cli-unused',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        out += c.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      return { code, out };
    };
    const [first, second] = await Promise.all([run(), run()]);
    if (first.code !== 0) console.error(first.out);
    expect(first.code, first.out).toBe(0);
    expect(second.code, second.out).toBe(0);
    expect(first.out).toContain('migrations applied');
    expect(await appliedMigrations(target.url)).toBe(migrationFiles.length);
  });
});
