// Owns reads from streaming replicas (DATABASE_READ_URL) with read-your-writes (docs/architecture.md, "Read
// replicas"). Each instance polls, every DATABASE_READ_POLL_MS, the primary's WAL insert position and every
// replica's replay position, and from those samples knows how far behind each replica is, in time. A read names the
// WAL position it must see (the position after the caller's last change, kept with the user's cache version in the
// store) and gets a replica that has replayed it and lags less than DATABASE_READ_MAX_LAG_MS, else the primary: the
// choice costs no round trip. A replica that errors, stops answering or falls behind only moves reads to the
// primary; a read that fails on a replica is retried on the primary, so a replica never fails a request.
import { type SQL, sql } from 'drizzle-orm';
import pg from 'pg';
import type { Logger } from './logger.js';
import { watchConnections } from './pg-connections.js';

/** What the router needs of a database handle; generic so this module does not import db.ts (which builds it). */
interface Executor {
  execute(query: SQL): PromiseLike<unknown>;
}

/**
 * A WAL position as 16 hex digits (fixed width, so positions compare as strings, in Lua as in TypeScript), or the
 * sentinel that sends a user's reads to the primary (the position of a change could not be read).
 */
export type WalPosition = string;
export const PRIMARY_ONLY: WalPosition = 'ffffffffffffffff';

/** `16/B374D848` → `00000016b374d848`. */
export function walPosition(lsn: string): WalPosition {
  const [hi, lo] = lsn.split('/');
  if (hi === undefined || lo === undefined) throw new Error(`not a WAL position: ${lsn}`);
  return ((BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)).toString(16).padStart(16, '0');
}

export type ReadTarget = 'primary' | 'replica';

export interface ReplicaStatus {
  name: string;
  /** Answered its last poll recently. */
  up: boolean;
  /** How far behind the primary, in ms (null: unknown — down, or no sample yet). */
  lagMs: number | null;
  /** Serving reads right now (up and within DATABASE_READ_MAX_LAG_MS). */
  eligible: boolean;
  pool: { total: number; idle: number; waiting: number };
}

export interface ReadStats {
  reads: Record<ReadTarget, number>;
  /** Reads that failed on a replica and were answered by the primary. */
  fallbacks: number;
  replicas: ReplicaStatus[];
}

export interface ReadRouter<Db extends Executor = Executor> {
  /** True when replicas are configured: only then do writes record positions and reads look them up. */
  readonly enabled: boolean;
  /**
   * The primary's WAL insert position, read right after a change committed: a replica that has replayed it has the
   * change. Null when there are no replicas (nothing to record); PRIMARY_ONLY when it could not be read.
   */
  writePosition(): Promise<WalPosition | null>;
  /**
   * Runs a read on a replica that has replayed `minPosition` (null: any replica within the lag bound will do), else
   * on the primary; a replica failure is retried on the primary.
   */
  read<T>(minPosition: WalPosition | null, run: (db: Db) => Promise<T>): Promise<T>;
  stats(): ReadStats;
  close(): Promise<void>;
}

export interface ReadRouterOptions<Db extends Executor> {
  primary: Db;
  /** A database handle over a replica's pool. */
  wrap(pool: pg.Pool): Db;
  urls: string[];
  poolSize: number;
  maxLagMs: number;
  pollMs: number;
  statementTimeoutMs: number;
  logger?: Pick<Logger, 'info' | 'warn'>;
}

/** Routes every read to the primary (no replicas configured, or the embedded database). */
export function primaryOnlyRouter<Db extends Executor>(primary: Db): ReadRouter<Db> {
  const reads = { primary: 0, replica: 0 };
  return {
    enabled: false,
    writePosition: async () => null,
    async read(_min, run) {
      reads.primary++;
      return run(primary);
    },
    stats: () => ({ reads: { ...reads }, fallbacks: 0, replicas: [] }),
    close: async () => {},
  };
}

interface Replica<Db> {
  name: string;
  pool: pg.Pool;
  db: Db;
  replay: bigint | null;
  lastOkAt: number;
  polling: boolean;
}

/** Replica `host:port` for labels and logs: never the user or password. */
function replicaName(url: string, index: number): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}`;
  } catch {
    return `replica-${index}`;
  }
}

export function createReadRouter<Db extends Executor>(options: ReadRouterOptions<Db>): ReadRouter<Db> {
  if (options.urls.length === 0) return primaryOnlyRouter(options.primary);
  const { primary, maxLagMs, pollMs, logger } = options;
  const replicas: Array<Replica<Db>> = options.urls.map((url, i) => {
    const pool = new pg.Pool({
      connectionString: url,
      max: options.poolSize,
      // A replica that does not answer quickly is treated as down (reads go to the primary), not waited for.
      connectionTimeoutMillis: Math.min(2_000, Math.max(200, maxLagMs)),
      // Bounded client-side: a replica URL may be a PgBouncer in front of the replica (which refuses the
      // statement_timeout startup parameter), and a read that times out is answered by the primary anyway.
      ...(options.statementTimeoutMs > 0 ? { query_timeout: options.statementTimeoutMs } : {}),
    });
    watchConnections(pool, logger);
    return {
      name: replicaName(url, i),
      pool,
      db: options.wrap(pool),
      replay: null,
      lastOkAt: 0,
      polling: false,
    };
  });
  // Primary positions sampled at the time the query was sent: everything committed before `at` is at or below `lsn`.
  // Kept long enough to measure any lag up to the bound.
  const samples: Array<{ at: number; lsn: bigint }> = [];
  const keepMs = maxLagMs + 4 * pollMs;
  const reads = { primary: 0, replica: 0 };
  let fallbacks = 0;
  let next = 0;
  let closed = false;
  const wasEligible = new Map<string, boolean>();

  const lagOf = (r: Replica<Db>, now: number): number | null => {
    if (r.replay === null || samples.length === 0) return null;
    // The newest sample the replica has replayed: it has everything committed before that sample was taken.
    for (let i = samples.length - 1; i >= 0; i--) {
      const s = samples[i];
      if (s && s.lsn <= r.replay) return Math.max(0, now - s.at);
    }
    const oldest = samples[0];
    return oldest ? now - oldest.at + pollMs : null;
  };
  const isUp = (r: Replica<Db>, now: number) => now - r.lastOkAt <= Math.max(5 * pollMs, 2_000);
  const isEligible = (r: Replica<Db>, now: number) => {
    if (!isUp(r, now)) return false;
    const lag = lagOf(r, now);
    return lag !== null && lag <= maxLagMs;
  };

  const pollReplica = async (r: Replica<Db>) => {
    if (r.polling) return;
    r.polling = true;
    try {
      const result = await r.pool.query<{ lsn: string | null }>(
        'select pg_last_wal_replay_lsn()::text as lsn',
      );
      const lsn = result.rows[0]?.lsn;
      // Null: not a replica (or not replaying yet). It must never serve reads as if it were one.
      r.replay = lsn ? BigInt(`0x${walPosition(lsn)}`) : null;
      if (lsn) r.lastOkAt = Date.now();
    } catch {
      r.replay = null;
    } finally {
      r.polling = false;
    }
  };
  let primaryPolling = false;
  const pollPrimary = async () => {
    if (primaryPolling) return;
    primaryPolling = true;
    const at = Date.now();
    try {
      const rows = (await primary.execute(
        sql`select pg_current_wal_insert_lsn()::text as lsn`,
      )) as unknown as {
        rows: Array<{ lsn: string }>;
      };
      const lsn = rows.rows[0]?.lsn;
      if (lsn) {
        samples.push({ at, lsn: BigInt(`0x${walPosition(lsn)}`) });
        while (samples.length > 2 && (samples[0]?.at ?? at) < at - keepMs) samples.shift();
      }
    } catch {
      // No new sample: replicas' measured lag grows until reads move to the primary (which is down anyway).
    } finally {
      primaryPolling = false;
    }
  };
  const poll = async () => {
    await Promise.all([pollPrimary(), ...replicas.map(pollReplica)]);
    const now = Date.now();
    for (const r of replicas) {
      const eligible = isEligible(r, now);
      if (wasEligible.get(r.name) !== eligible) {
        wasEligible.set(r.name, eligible);
        // Transitions only: a lagging or lost replica is worth one line, not one per poll.
        if (wasEligible.size > 0 || !eligible)
          logger?.info(
            { replica: r.name, up: isUp(r, now), lagMs: lagOf(r, now) },
            eligible ? 'read replica serving reads' : 'read replica not serving reads (down or lagging)',
          );
      }
    }
  };
  const timer = setInterval(() => {
    if (!closed) void poll();
  }, pollMs);
  timer.unref();
  void poll();

  const choose = (minPosition: WalPosition | null): Replica<Db> | null => {
    if (minPosition === PRIMARY_ONLY) return null;
    const need = minPosition === null ? 0n : BigInt(`0x${minPosition}`);
    const now = Date.now();
    for (let i = 0; i < replicas.length; i++) {
      const r = replicas[(next + i) % replicas.length];
      if (r && r.replay !== null && r.replay >= need && isEligible(r, now)) {
        next = (next + i + 1) % replicas.length;
        return r;
      }
    }
    return null;
  };

  return {
    enabled: true,
    async writePosition() {
      try {
        const result = (await primary.execute(
          sql`select pg_current_wal_insert_lsn()::text as lsn`,
        )) as unknown as { rows: Array<{ lsn: string }> };
        const lsn = result.rows[0]?.lsn;
        return lsn ? walPosition(lsn) : PRIMARY_ONLY;
      } catch (err) {
        logger?.warn(
          { err },
          'could not read the WAL position after a change: that user reads from the primary',
        );
        return PRIMARY_ONLY;
      }
    },
    async read(minPosition, run) {
      const replica = choose(minPosition);
      if (replica) {
        try {
          const result = await run(replica.db);
          reads.replica++;
          return result;
        } catch (err) {
          // Whatever went wrong there (connection refused, recovery conflict, timeout), the primary answers.
          fallbacks++;
          replica.lastOkAt = 0;
          logger?.warn({ replica: replica.name, err }, 'read failed on a replica; answered by the primary');
        }
      }
      reads.primary++;
      return run(primary);
    },
    stats() {
      const now = Date.now();
      return {
        reads: { ...reads },
        fallbacks,
        replicas: replicas.map((r) => ({
          name: r.name,
          up: isUp(r, now),
          lagMs: isUp(r, now) ? lagOf(r, now) : null,
          eligible: isEligible(r, now),
          pool: { total: r.pool.totalCount, idle: r.pool.idleCount, waiting: r.pool.waitingCount },
        })),
      };
    },
    async close() {
      closed = true;
      clearInterval(timer);
      await Promise.allSettled(replicas.map((r) => r.pool.end()));
    },
  };
}
