// Owns the database: Drizzle over node-postgres (DATABASE_URL) or PGlite under DATA_DIR (embedded default),
// and migrations, which run under a PostgreSQL advisory lock so several instances can start at once.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { type SQL, sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
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
  logger?: Pick<Logger, 'info' | 'warn'>;
  /**
   * PostgreSQL `application_name` of every connection (`herald:<INSTANCE_ID>`), so an operator (or a test) can
   * tell one instance's backends apart in `pg_stat_activity` and terminate only those.
   */
  applicationName?: string;
}

export function createDatabase(options: DatabaseOptions): Database {
  return options.databaseUrl
    ? createPostgres(options.databaseUrl, {
        poolSize: options.poolSize ?? 10,
        statementTimeoutMs: options.statementTimeoutMs ?? 0,
        applicationName: options.applicationName,
        logger: options.logger,
      })
    : createPglite(options.dataDir, options.lockOwner ?? 'server', options.logger);
}

/**
 * PostgreSQL SQLSTATEs and Node network errors that mean "the database is unreachable or dropped us", not "the
 * query is wrong": class 08 (connection exception), 57P01/57P02/57P03 (admin/crash shutdown, cannot connect
 * now), 53300 (too many connections).
 */
const UNAVAILABLE_CODES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '53300',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
// node-postgres reports a dropped or unusable connection with these messages and no code.
const UNAVAILABLE_MESSAGE =
  /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect|Cannot use a pool after calling end/i;

/**
 * True when `err` (or any error in its `cause` chain: Drizzle wraps driver errors) says the database cannot be
 * reached right now. The global error handler answers these 503 UNAVAILABLE instead of 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
    if (UNAVAILABLE_MESSAGE.test(current.message)) return true;
    // An AggregateError (a connect to several resolved addresses) lists its causes in `errors`.
    const inner = (current as { errors?: unknown }).errors;
    if (Array.isArray(inner) && inner.some((e) => isDatabaseUnavailable(e))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

function createPostgres(
  url: string,
  opts: {
    poolSize: number;
    statementTimeoutMs: number;
    applicationName?: string;
    logger?: Pick<Logger, 'warn'>;
  },
): Database {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.poolSize,
    connectionTimeoutMillis: 5_000,
    ...(opts.statementTimeoutMs > 0 ? { statement_timeout: opts.statementTimeoutMs } : {}),
    // PostgreSQL truncates to 63 bytes itself; cut here so the name stays valid UTF-8.
    ...(opts.applicationName ? { application_name: opts.applicationName.slice(0, 63) } : {}),
  });
  // A connection lost while its client is idle in the pool (database restart, pg_terminate_backend) is
  // reported here; the pool drops that client and opens a new one on demand.
  pool.on('error', (err) =>
    opts.logger?.warn({ err: err.message }, 'database connection lost (idle client)'),
  );
  // A connection lost while its client is checked out (a transaction between two statements, the migration
  // session) is emitted on the client itself, which pg-pool leaves without an 'error' listener while it is
  // checked out: unhandled, that event would end the process. A permanent listener on every client makes it
  // a failed query instead; the client is marked unusable, so the pool discards it on release.
  pool.on('connect', (client) => {
    client.on('error', (err) =>
      opts.logger?.warn({ err: err.message }, 'database connection lost (client in use)'),
    );
  });
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

function createPglite(dataDir: string, lockOwner: string, logger?: Pick<Logger, 'info'>): Database {
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
