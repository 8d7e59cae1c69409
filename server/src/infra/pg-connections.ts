// Owns what every node-postgres pool of Herald's needs so that losing the database never ends the process.
import type pg from 'pg';
import type { Logger } from './logger.js';

/**
 * Keeps a lost connection from ending the process. One lost while its client is idle in the pool (database
 * restart, pg_terminate_backend) is reported on the pool, which drops that client and opens a new one on demand.
 * One lost while its client is checked out (a transaction between two statements) is emitted on the client
 * itself, which pg-pool leaves without an 'error' listener while it is checked out: unhandled, that event would
 * end the process. A permanent listener on every client makes it a failed query instead; the client is marked
 * unusable, so the pool discards it on release.
 */
export function watchConnections(pool: pg.Pool, logger?: Pick<Logger, 'warn'>): void {
  pool.on('error', (err) => logger?.warn({ err: err.message }, 'database connection lost (idle client)'));
  pool.on('connect', (client) => {
    client.on('error', (err) =>
      logger?.warn({ err: err.message }, 'database connection lost (client in use)'),
    );
  });
}
