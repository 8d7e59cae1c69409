// Owns named prepared statements for the hottest statements (issue 27). Planning cost PostgreSQL more than running
// them: an uncached list page's statement 267 µs a query unnamed against 120 µs named, a chat message's insert
// 580–610 µs against 200–220 µs. A statement passed here runs as a named statement on node-postgres: each pool
// connection parses and plans it once, later executions send only Bind/Execute.
//
// Where a named statement cannot live on one server connection, the statement runs unnamed as before: on the
// embedded database, inside a transaction (its executor is not a pool), on a pool found to be a pooler at start-up
// (infra/db.ts), and on a pool for the rest of the process once PostgreSQL answers that a named statement is
// missing or already exists (a pooler in transaction mode that moved the client to another server connection:
// PgBouncer before 1.21), or that a migration changed what a prepared statement returns. PostgreSQL refuses those
// before executing anything, so the statement is retried unnamed and the caller never sees the error; a write is
// safe to retry for the same reason. Only for single statements outside a transaction: an error inside one would
// abort the transaction around it.
import { createHash } from 'node:crypto';
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { BoundedMap } from './bounded-map.js';

/** Anything that runs a drizzle SQL query: the primary's Db or a replica's (their `$client` is the pg.Pool). */
interface Executor {
  execute(query: SQL): PromiseLike<unknown>;
}

// The same rendering drizzle applies before it sends a query (its node-postgres session), so a statement text
// and parameters are identical either way.
const dialect = new PgDialect({ casing: 'snake_case' });

// Date and time types stay text, as drizzle's node-postgres session leaves them: the rows are the same whichever
// path read them (rows.ts formats them).
const RAW_TEXT_OIDS = new Set<number>([
  pg.types.builtins.DATE,
  pg.types.builtins.TIMESTAMP,
  pg.types.builtins.TIMESTAMPTZ,
  pg.types.builtins.INTERVAL,
  1115, // timestamp[]
  1182, // date[]
  1185, // timestamptz[]
  1187, // interval[]
  1231, // numeric[]
]);
const keepText = (value: string) => value;
const TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    RAW_TEXT_OIDS.has(oid)
      ? keepText
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/** invalid_sql_statement_name (Bind on a connection without it), duplicate_prepared_statement (Parse twice). */
const NAMED_STATEMENT_ERRORS = new Set(['26000', '42P05']);
/** A migration changed the columns a statement returns while it was prepared: PostgreSQL will not re-plan it. */
const RESULT_TYPE_CHANGED = /cached plan must not change result type/;

// Statement texts are few (the shapes of the hot statements); the bound only guards against a caller passing
// ever-changing texts.
const names = new BoundedMap<string>(256);
const unnamedPools = new WeakSet<pg.Pool>();

/** Statements on this pool run unnamed from now on (it is a pooler that cannot keep a named statement). */
export function disablePreparedStatements(pool: pg.Pool): void {
  unnamedPools.add(pool);
}

/** Whether statements on this executor run as named statements (tests). */
export function preparedStatementsEnabled(via: Executor): boolean {
  const pool = poolOf(via);
  return pool !== null && !unnamedPools.has(pool);
}

function poolOf(via: Executor): pg.Pool | null {
  const client = (via as { $client?: unknown }).$client;
  return client instanceof pg.Pool ? client : null;
}

function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `herald_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
    names.set(text, name);
  }
  return name;
}

function isNamedStatementError(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code !== 'string') return false;
  return (
    NAMED_STATEMENT_ERRORS.has(code) ||
    (code === '0A000' && typeof message === 'string' && RESULT_TYPE_CHANGED.test(message))
  );
}

/** The rows of one statement, run as a named prepared statement where the executor allows it (module header). */
export async function preparedRows<T extends pg.QueryResultRow>(via: Executor, query: SQL): Promise<T[]> {
  const pool = poolOf(via);
  if (pool === null || unnamedPools.has(pool)) {
    return ((await via.execute(query)) as { rows: T[] }).rows;
  }
  const { sql: text, params } = dialect.sqlToQuery(query);
  try {
    return (await pool.query<T>({ name: statementName(text), text, values: params, types: TYPES })).rows;
  } catch (err) {
    if (!isNamedStatementError(err)) throw err;
    unnamedPools.add(pool);
    return (await pool.query<T>({ text, values: params, types: TYPES })).rows;
  }
}
