// Owns waiting for the database and the store at start-up. In an orchestrator the service often starts before
// PostgreSQL or Redis accepts connections: each is tried with capped exponential backoff until STARTUP_WAIT_MS
// has passed, one log line per failed attempt naming the variable (DATABASE_URL, CACHE_URL) and its host:port,
// never its credentials. Past the bound, or on an error waiting cannot fix (a missing database, refused
// credentials), the caller gets a StartupWaitError whose message is the one line to print before exiting 1.

import { Redis } from 'ioredis';
import pg from 'pg';
import type { Logger } from '../infra/logger.js';
import { parseClusterUrls } from '../infra/store.js';

export class StartupWaitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupWaitError';
  }
}

export interface StartupWaitOptions {
  databaseUrl?: string;
  cacheUrl?: string;
  cacheCluster: boolean;
  /** Bound on the whole wait (both dependencies are waited for side by side). 0: one attempt each. */
  waitMs: number;
  logger: Pick<Logger, 'info' | 'warn'>;
}

type Probe = (timeoutMs: number) => Promise<void>;

/** An attempt that failed, and whether trying again could help. */
interface Failure {
  cause: string;
  final: boolean;
}

/** host:port (and /database) of each URL in a comma-separated list: never user or password. */
export function describeTarget(list: string): string {
  return list
    .split(',')
    .map((entry) => {
      try {
        const u = new URL(entry.trim());
        const db = u.pathname.replace(/^\/+/, '');
        return `${u.host}${db ? `/${db}` : ''}`;
      } catch {
        return '(unparsable URL)';
      }
    })
    .join(', ');
}

/** The error as one line, with anything that could be a credential of `url` cut out. */
function causeOf(err: unknown, url: string): string {
  const e = err as { code?: string; message?: string; errors?: unknown[] } | undefined;
  // Node's "connect ECONNREFUSED" with several addresses is an AggregateError whose own message is empty.
  let message =
    e?.message ||
    (Array.isArray(e?.errors) ? e.errors.map((x) => (x as Error).message).join('; ') : '') ||
    e?.code ||
    String(err);
  for (const entry of url.split(',')) {
    try {
      const u = new URL(entry.trim());
      if (u.password) message = message.split(decodeURIComponent(u.password)).join('***');
      if (u.password) message = message.split(u.password).join('***');
    } catch {
      // unparsable: config already refused it
    }
  }
  return message.replace(/\s+/g, ' ').trim();
}

function databaseProbe(url: string): { probe: Probe; classify: (err: unknown) => Failure } {
  return {
    async probe(timeoutMs) {
      const client = new pg.Client({
        connectionString: url,
        connectionTimeoutMillis: timeoutMs,
        application_name: 'herald-startup-wait',
      });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('select 1');
      } finally {
        await client.end().catch(() => {});
      }
    },
    classify(err) {
      const code = (err as { code?: string }).code;
      const cause = causeOf(err, url);
      // 3D000 invalid_catalog_name; 28P01/28000 refused credentials: configuration, not start order.
      if (code === '3D000') {
        return { cause: `the database does not exist (${cause}); create it or fix the name`, final: true };
      }
      if (code === '28P01' || code === '28000') {
        return { cause: `the server refused the credentials (${cause})`, final: true };
      }
      return { cause, final: false };
    },
  };
}

function storeProbe(url: string, cluster: boolean): { probe: Probe; classify: (err: unknown) => Failure } {
  return {
    async probe(timeoutMs) {
      // A cluster is reachable when one of its seed nodes answers; the Cluster client discovers the rest later.
      const seeds = cluster ? parseClusterUrls(url) : undefined;
      const targets = seeds
        ? seeds.nodes.map((n) => ({
            // parseClusterUrls returns { host, port } objects (ClusterNode also allows strings).
            host: String((n as { host?: string }).host),
            port: Number((n as { port?: number }).port),
            username: seeds.username,
            password: seeds.password,
            tls: seeds.tls ? {} : undefined,
          }))
        : [undefined];
      let lastError: unknown;
      for (const target of targets) {
        const options = {
          lazyConnect: true,
          connectTimeout: timeoutMs,
          commandTimeout: timeoutMs,
          maxRetriesPerRequest: 0,
          enableOfflineQueue: false,
          retryStrategy: () => null,
          connectionName: 'herald-startup-wait',
        };
        const client = target ? new Redis({ ...target, ...options }) : new Redis(url, options);
        // ioredis rejects connect() with a bare "Connection is closed."; the socket's own error (ECONNREFUSED,
        // ENOTFOUND, a TLS failure) arrives as an 'error' event and is the cause worth printing.
        let socketError: unknown;
        client.on('error', (err: unknown) => {
          socketError ??= err;
        });
        try {
          await client.connect();
          await client.ping();
          return;
        } catch (err) {
          lastError = socketError ?? err;
        } finally {
          client.disconnect();
        }
      }
      throw lastError;
    },
    classify(err) {
      const cause = causeOf(err, url);
      if (/WRONGPASS|NOAUTH|invalid password|invalid username/i.test(cause)) {
        return { cause: `the store refused the credentials (${cause})`, final: true };
      }
      return { cause, final: false };
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(
  variable: string,
  target: string,
  { probe, classify }: { probe: Probe; classify: (err: unknown) => Failure },
  deadline: number,
  logger: StartupWaitOptions['logger'],
): Promise<void> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const remaining = deadline - Date.now();
    try {
      // Each attempt may take at most what is left of the wait (but long enough for a slow TLS handshake).
      await probe(Math.max(1_000, Math.min(5_000, remaining)));
      if (attempt > 1) logger.info({ variable, target, attempt }, `${variable} (${target}) reachable`);
      return;
    } catch (err) {
      const failure = classify(err);
      const delay = Math.min(250 * 2 ** (attempt - 1), 5_000);
      const left = deadline - Date.now();
      if (failure.final) {
        throw new StartupWaitError(`Herald cannot start: ${variable} (${target}): ${failure.cause}`);
      }
      if (left <= 0) {
        throw new StartupWaitError(
          `Herald cannot start: ${variable} (${target}) not reachable after ${attempt} attempt${attempt > 1 ? 's' : ''} ` +
            `in ${((Date.now() - started) / 1000).toFixed(1)} s: ${failure.cause} ` +
            '(STARTUP_WAIT_MS bounds the wait)',
        );
      }
      const wait = Math.min(delay, left);
      logger.warn(
        { variable, target, attempt, retryInMs: wait, err: failure.cause },
        `waiting for ${variable} (${target}): attempt ${attempt} failed: ${failure.cause}; retrying in ${wait} ms`,
      );
      await sleep(wait);
    }
  }
}

/** Resolves when both configured dependencies answer; rejects with a StartupWaitError otherwise. */
export async function waitForDependencies(options: StartupWaitOptions): Promise<void> {
  const deadline = Date.now() + options.waitMs;
  const waits: Promise<void>[] = [];
  if (options.databaseUrl) {
    waits.push(
      waitFor(
        'DATABASE_URL',
        describeTarget(options.databaseUrl),
        databaseProbe(options.databaseUrl),
        deadline,
        options.logger,
      ),
    );
  }
  if (options.cacheUrl) {
    waits.push(
      waitFor(
        'CACHE_URL',
        describeTarget(options.cacheUrl),
        storeProbe(options.cacheUrl, options.cacheCluster),
        deadline,
        options.logger,
      ),
    );
  }
  // The first failure is the one reported (the other wait is abandoned with the process).
  await Promise.all(waits);
}
