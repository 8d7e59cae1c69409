// Owns the database: Drizzle over node-postgres (DATABASE_URL) or PGlite under DATA_DIR (embedded default),
// and migrations, which run under a PostgreSQL advisory lock so several instances can start at once.
// PGlite is a development dependency (production requires DATABASE_URL): it is imported only when used, so a
// production install (`npm ci --omit=dev`) runs without its 26 MB.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type SQL, sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { acquireDataDirLock } from './data-dir-lock.js';
import type { Logger } from './logger.js';
import * as schema from './schema/index.js';

export type Schema = typeof schema;
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  migrate(): Promise<void>;
  ping(): Promise<void>;
  /** Queries waiting for a pool connection right now (0 for the embedded database, which has no pool). */
  waiting?(): number;
  close(): Promise<void>;
}

export const MIGRATIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Arbitrary but fixed: every Herald instance contends for the same advisory lock while migrating.
const MIGRATION_LOCK_KEY = 727_001_042;

export interface DatabaseOptions {
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
  /** PostgreSQL statement_timeout in ms (0 or unset: none), so a stuck query cannot hold a request forever. */
  statementTimeoutMs?: number;
  /** Who opens the embedded database (written into DATA_DIR's lock file): "server" or a CLI command. */
  lockOwner?: string;
  /** Progress of the embedded database's first open, which takes seconds (initdb in WebAssembly). */
  logger?: Pick<Logger, 'info'>;
}

/** DATABASE_URL is unset and the embedded database is not installed (a production install). */
export class EmbeddedDatabaseUnavailableError extends Error {
  constructor() {
    super(
      'DATABASE_URL is not set and the embedded database (@electric-sql/pglite, a development dependency) is not ' +
        'installed: set DATABASE_URL to a PostgreSQL database, or run `npm install` for the embedded default',
    );
    this.name = 'EmbeddedDatabaseUnavailableError';
  }
}

export async function createDatabase(options: DatabaseOptions): Promise<Database> {
  return options.databaseUrl
    ? createPostgres(options.databaseUrl, options.poolSize ?? 10, options.statementTimeoutMs ?? 0)
    : await createPglite(options.dataDir, options.lockOwner ?? 'server', options.logger);
}

async function loadPglite() {
  try {
    const [{ PGlite }, { pg_trgm }, { drizzle }, { migrate }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('@electric-sql/pglite/contrib/pg_trgm'),
      import('drizzle-orm/pglite'),
      import('drizzle-orm/pglite/migrator'),
    ]);
    return { PGlite, pg_trgm, drizzlePglite: drizzle, migratePglite: migrate };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') {
      throw new EmbeddedDatabaseUnavailableError();
    }
    throw err;
  }
}

function createPostgres(url: string, poolSize: number, statementTimeoutMs: number): Database {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 5_000,
    ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
  });
  // An idle client losing its connection (database restart) must not crash the process.
  pool.on('error', () => {});
  const db = drizzlePg(pool, { schema, casing: 'snake_case' }) as unknown as Db;
  return {
    db,
    kind: 'postgres',
    async migrate() {
      const client = await pool.connect();
      try {
        // Another instance may hold the lock for a long migration, and migrations themselves may be slow: the
        // per-statement bound is for request traffic, not for this session.
        await client.query('SET statement_timeout = 0');
        await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
        try {
          await migratePg(drizzlePg(client, { schema, casing: 'snake_case' }), {
            migrationsFolder: MIGRATIONS_FOLDER,
          });
        } finally {
          await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
        }
      } finally {
        // The pooled client goes back with the pool's own timeout again.
        await client.query('RESET statement_timeout').catch(() => {});
        client.release();
      }
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
    waiting: () => pool.waitingCount,
    async close() {
      await pool.end();
    },
  };
}

async function createPglite(
  dataDir: string,
  lockOwner: string,
  logger?: Pick<Logger, 'info'>,
): Promise<Database> {
  const { PGlite, pg_trgm, drizzlePglite, migratePglite } = await loadPglite();
  const dir = path.resolve(dataDir, 'pglite');
  // Before opening: a second process on the same directory would silently lose writes (see data-dir-lock.ts).
  const lock = acquireDataDirLock(dataDir, lockOwner);
  const fresh = !existsSync(path.join(dir, 'PG_VERSION'));
  mkdirSync(dir, { recursive: true });
  const openedAt = performance.now();
  logger?.info(
    { dir },
    fresh
      ? `initialising embedded database at ${dir} (first start: creating the cluster takes a few seconds)`
      : `opening embedded database at ${dir}`,
  );
  const client = new PGlite(dir, { extensions: { pg_trgm } });
  const db = drizzlePglite(client, { schema, casing: 'snake_case' }) as unknown as Db;
  return {
    db,
    kind: 'pglite',
    async migrate() {
      await client.waitReady;
      const startedAt = performance.now();
      logger?.info({ ms: Math.round(startedAt - openedAt) }, 'embedded database ready; running migrations');
      // PGlite is single-process (the lock file keeps other processes out); no advisory lock needed.
      await migratePglite(drizzlePglite(client, { schema, casing: 'snake_case' }), {
        migrationsFolder: MIGRATIONS_FOLDER,
      });
      logger?.info(
        { ms: Math.round(performance.now() - startedAt) },
        `migrations done in ${Math.round(performance.now() - startedAt)} ms`,
      );
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
    async close() {
      try {
        await client.close();
      } finally {
        lock.release();
      }
    },
  };
}

/** Rows of a raw `db.execute` result; node-postgres and PGlite both expose `rows`. */
export function rowsOf<T>(result: unknown): T[] {
  return (result as { rows: T[] }).rows;
}

/** text[] parameter that works on node-postgres and PGlite alike. */
export function textArray(values: string[]): SQL {
  return sql`${`{${values.map((v) => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`}::text[]`;
}
