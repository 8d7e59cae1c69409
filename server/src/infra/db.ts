// Owns the database: Drizzle over node-postgres (DATABASE_URL) or PGlite under DATA_DIR (embedded default),
// and migrations, which run under a PostgreSQL advisory lock so several instances can start at once.
// Nothing here depends on session state between transactions, so DATABASE_URL may be PgBouncer in transaction
// pooling mode (docs/operations.md, "PostgreSQL past one server"): the migration lock is transaction-level and
// taken on DATABASE_DIRECT_URL when set, no SET outlives its transaction, no LISTEN, and named prepared
// statements only for the hot statements of infra/prepared-statements.ts, which run unnamed on a pooler.
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
import { watchConnections } from './pg-connections.js';
import { disablePreparedStatements } from './prepared-statements.js';
import { createReadRouter, primaryOnlyRouter, type ReadRouter } from './read-replicas.js';
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
  /** Connections of the pool (absent on the embedded database), for /metrics. */
  poolStats?(): PoolStats;
  /** Where replica-eligible reads run (infra/read-replicas.ts); the primary alone without DATABASE_READ_URL. */
  reads?: ReadRouter<Db>;
  close(): Promise<void>;
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export function poolStatsOf(pool: pg.Pool): PoolStats {
  return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
}

export const MIGRATIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Arbitrary but fixed: every Herald instance contends for the same advisory lock while migrating.
const MIGRATION_LOCK_KEY = 727_001_042;

export interface DatabaseOptions {
  databaseUrl?: string;
  /** The server itself, for what needs a session of its own (migrations) when databaseUrl is a pooler. */
  directUrl?: string;
  dataDir: string;
  poolSize?: number;
  /** PostgreSQL statement_timeout in ms (0 or unset: none), so a stuck query cannot hold a request forever. */
  statementTimeoutMs?: number;
  /** Streaming replicas for the reads that may use one (DATABASE_READ_URL). */
  readUrls?: string[];
  readMaxLagMs?: number;
  readPollMs?: number;
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
    ? createPostgres(options.databaseUrl, options)
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

/** PgBouncer's answer to a startup parameter it does not track (statement_timeout among them). */
const UNSUPPORTED_STARTUP_PARAMETER = /unsupported startup parameter/i;

/**
 * Whether `url` refuses statement_timeout as a connection startup parameter, which PgBouncer does (in any pool
 * mode). One throwaway connection at start-up; a database that cannot be reached at all throws as before.
 */
async function refusesStartupTimeout(url: string, statementTimeoutMs: number): Promise<boolean> {
  const probe = new pg.Client({
    connectionString: url,
    statement_timeout: statementTimeoutMs,
    connectionTimeoutMillis: 5_000,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return false;
  } catch (err) {
    if (err instanceof Error && UNSUPPORTED_STARTUP_PARAMETER.test(err.message)) return true;
    throw err;
  } finally {
    await probe.end().catch(() => {});
  }
}

function createPostgres(url: string, options: DatabaseOptions): Database {
  const statementTimeoutMs = options.statementTimeoutMs ?? 0;
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: 5_000,
    // Sent at connect, so the bound costs no round trip per query. Taken back at start-up if DATABASE_URL turns out
    // to be a pooler that refuses it (see migrate()).
    ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
    // PostgreSQL truncates to 63 bytes itself; cut here so the name stays valid UTF-8.
    ...(options.applicationName ? { application_name: options.applicationName.slice(0, 63) } : {}),
  });
  watchConnections(pool, options.logger);
  const db = drizzlePg(pool, { schema, casing: 'snake_case' }) as unknown as Db;
  let poolerChecked = false;
  const reads = createReadRouter<Db>({
    primary: db,
    wrap: (replicaPool) => drizzlePg(replicaPool, { schema, casing: 'snake_case' }) as unknown as Db,
    urls: options.readUrls ?? [],
    poolSize: options.poolSize ?? 10,
    maxLagMs: options.readMaxLagMs ?? 2_000,
    pollMs: options.readPollMs ?? 100,
    statementTimeoutMs,
    ...(options.logger ? { logger: options.logger } : {}),
  });

  /**
   * Behind PgBouncer the statement timeout cannot travel as a startup parameter, and a session SET would leak to
   * whichever client gets that server connection next. The pool's connections (none is open yet: this runs
   * before the first query) then bound each query client-side instead (`query_timeout`: the request fails at the
   * bound and the connection is dropped); the server-side cancel is PgBouncer's own `query_timeout` or a role
   * setting (`ALTER ROLE … SET statement_timeout`), as docs/operations.md says.
   */
  const checkPooler = async () => {
    if (poolerChecked) return;
    poolerChecked = true;
    // Probed whatever the configured bound (any value shows the refusal): a pooler also turns the hot statements'
    // names off (infra/prepared-statements.ts): a named statement must not outlive a transaction there.
    if (!(await refusesStartupTimeout(url, statementTimeoutMs || 3_600_000))) return;
    disablePreparedStatements(pool);
    options.logger?.info(
      'DATABASE_URL is a pooler (it refuses a startup parameter): the hot statements run unnamed',
    );
    if (statementTimeoutMs === 0) return;
    const poolOptions = pool.options as pg.PoolConfig;
    delete poolOptions.statement_timeout;
    poolOptions.query_timeout = statementTimeoutMs;
    options.logger?.info(
      { statementTimeoutMs },
      'DATABASE_URL refuses statement_timeout at connect (a pooler such as PgBouncer): queries are bounded client-side; set the server-side bound in the pooler or on the role (docs/operations.md)',
    );
  };

  return {
    db,
    kind: 'postgres',
    async migrate() {
      await checkPooler();
      // Its own connection, on the server itself when DATABASE_DIRECT_URL names it. The lock is transaction-level
      // and the migrations run in that same transaction (drizzle's BEGIN inside it only warns; its COMMIT ends
      // it and releases the lock), so this also works through a transaction-mode pooler: nothing outlives it.
      const client = new pg.Client({
        connectionString: options.directUrl ?? url,
        connectionTimeoutMillis: 5_000,
        ...(options.applicationName ? { application_name: options.applicationName.slice(0, 63) } : {}),
      });
      client.on('error', () => {});
      await client.connect();
      try {
        await client.query('BEGIN');
        // Another instance may hold the lock for a long migration, and migrations themselves may be slow.
        await client.query('SET LOCAL statement_timeout = 0');
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
        await migratePg(drizzlePg(client, { schema, casing: 'snake_case' }), {
          migrationsFolder: MIGRATIONS_FOLDER,
        });
        // Normally already committed by the migrator (then this only draws a warning).
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        await client.end().catch(() => {});
      }
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
    waiting: () => pool.waitingCount,
    poolStats: () => poolStatsOf(pool),
    reads,
    async close() {
      await reads.close();
      await pool.end();
    },
  };
}

async function createPglite(
  dataDir: string,
  lockOwner: string,
  logger?: Pick<Logger, 'info' | 'warn'>,
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
    reads: primaryOnlyRouter(db),
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

/**
 * `\uD800`–`\uDFFF` escapes that JSON.stringify writes for lone UTF-16 surrogates (a pair is written as the
 * character itself), when the backslash starts an escape (an even run of backslashes before it: `\\ud800` is a
 * backslash followed by the text "ud800" and is left alone).
 */
const LONE_SURROGATE_ESCAPE = /(?<!\\)((?:\\\\)*)\\ud[89a-f][0-9a-f]{2}/gi;

/**
 * JSON text PostgreSQL can store: JSON.stringify, with every lone UTF-16 surrogate (in any string or key, at any
 * depth) replaced by U+FFFD. JavaScript strings may hold lone surrogates (a `\ud800` JSON escape parses to one);
 * JSON.stringify writes them back as `\ud800`, which PostgreSQL's jsonb refuses ("unsupported Unicode escape
 * sequence"), failing the statement. Text parameters already store them as U+FFFD (the UTF-8 encoding of the
 * driver), so this makes jsonb store exactly what text does. Every JSON document Herald stores goes through
 * here: `jsonb()` parameters and the queued webhook bodies (test/architecture/jsonb-params.test.ts).
 */
export function storableJson(value: unknown): string {
  const json = JSON.stringify(value) ?? 'null';
  return json.includes('\\u') ? json.replace(LONE_SURROGATE_ESCAPE, '$1\ufffd') : json;
}

/** A jsonb parameter (`$n::jsonb`) holding `value` as storableJson writes it: the only way to pass JSON to SQL. */
export function jsonb(value: unknown): SQL {
  return sql`${storableJson(value)}::jsonb`;
}
