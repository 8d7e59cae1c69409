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

/** Which feature a replica-eligible read serves (the `feature` label of herald_db_reads_total). */
export type ReadFeature = 'notifications' | 'chat';

export interface ReadStats {
  reads: Record<ReadTarget, number>;
  /** The same reads per feature. */
  byFeature: Record<ReadFeature, Record<ReadTarget, number>>;
  /** Reads that failed on a replica and were answered by the primary. */
  fallbacks: number;
  /**
   * Reads whose position no replica was known to have (the polled positions lag by up to a poll interval), so one
   * replica was asked directly: by where the read then ran.
   */
  probes: Record<ReadTarget, number>;
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
   * on the primary; a replica failure is retried on the primary. `feature` only labels the count.
   */
  read<T>(minPosition: WalPosition | null, run: (db: Db) => Promise<T>, feature: ReadFeature): Promise<T>;
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

/** Read counters, in total and per feature. */
function readCounts() {
  const total: Record<ReadTarget, number> = { primary: 0, replica: 0 };
  const byFeature: Record<ReadFeature, Record<ReadTarget, number>> = {
    notifications: { primary: 0, replica: 0 },
    chat: { primary: 0, replica: 0 },
  };
  return {
    count(target: ReadTarget, feature: ReadFeature) {
      total[target]++;
      byFeature[feature][target]++;
    },
    snapshot: () => ({
      reads: { ...total },
      byFeature: { notifications: { ...byFeature.notifications }, chat: { ...byFeature.chat } },
    }),
  };
}

/** Routes every read to the primary (no replicas configured, or the embedded database). */
export function primaryOnlyRouter<Db extends Executor>(primary: Db): ReadRouter<Db> {
  const counts = readCounts();
  return {
    enabled: false,
    writePosition: async () => null,
    async read(_min, run, feature) {
      counts.count('primary', feature);
      return run(primary);
    },
    stats: () => ({ ...counts.snapshot(), fallbacks: 0, probes: { primary: 0, replica: 0 }, replicas: [] }),
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
  /** A replay-position query sent on behalf of reads (see probe), shared while in flight. */
  probing: Promise<bigint | null> | undefined;
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
      probing: undefined,
    };
  });
  // Primary positions sampled at the time the query was sent: everything committed before `at` is at or below `lsn`.
  // Kept long enough to measure any lag up to the bound.
  const samples: Array<{ at: number; lsn: bigint }> = [];
  const keepMs = maxLagMs + 4 * pollMs;
  const counts = readCounts();
  let fallbacks = 0;
  // Reads that asked a replica for its replay position, by where they then ran.
  const probes: Record<ReadTarget, number> = { primary: 0, replica: 0 };
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
      // An error is an answer: the replica is down now (as after a failed read), not only once the window passes.
      r.lastOkAt = 0;
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

  /**
   * The polled replay positions are up to DATABASE_READ_POLL_MS old, so right after a change (a busy chat room, a
   * user who just wrote) no replica looks new enough although one usually is: streaming replay trails the primary by
   * far less than a poll interval. One trivial query to an eligible replica settles it and keeps that read off the
   * primary. Reads share a query in flight: replay only moves forward, so any answer is at least as new as the
   * replica was when the read asked. One replica is asked, so a read waits for at most one extra round trip.
   */
  const probe = async (minPosition: WalPosition): Promise<Replica<Db> | null> => {
    const need = BigInt(`0x${minPosition}`);
    const now = Date.now();
    for (let i = 0; i < replicas.length; i++) {
      const r = replicas[(next + i) % replicas.length];
      if (!r || !isEligible(r, now)) continue;
      r.probing ??= r.pool
        .query<{ lsn: string | null }>('select pg_last_wal_replay_lsn()::text as lsn')
        .then(
          (result) => {
            const lsn = result.rows[0]?.lsn;
            return lsn ? BigInt(`0x${walPosition(lsn)}`) : null;
          },
          () => {
            // As a failed read does: the replica is down until a poll says otherwise.
            r.lastOkAt = 0;
            return null;
          },
        )
        .finally(() => {
          r.probing = undefined;
        });
      const replay = await r.probing;
      const serves = replay !== null && replay >= need;
      probes[serves ? 'replica' : 'primary']++;
      if (replay === null) return null;
      if (r.replay === null || replay > r.replay) r.replay = replay;
      r.lastOkAt = Date.now();
      if (!serves) return null;
      next = (next + i + 1) % replicas.length;
      return r;
    }
    return null;
  };

  const readWritePosition = async (): Promise<WalPosition> => {
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
  };
  // Writers that ask in the same turn of the event loop (a batch of chat sends resolved together, several features'
  // changes) share one query. Only a query not yet sent can be shared: one already sent may have run before a later
  // caller's commit. So the shared query is sent from a microtask, after every caller of this turn has asked.
  let queued: Promise<WalPosition> | undefined;

  return {
    enabled: true,
    writePosition() {
      queued ??= Promise.resolve().then(() => {
        queued = undefined;
        return readWritePosition();
      });
      return queued;
    },
    async read(minPosition, run, feature) {
      let replica = choose(minPosition);
      if (!replica && minPosition !== null && minPosition !== PRIMARY_ONLY)
        replica = await probe(minPosition);
      if (replica) {
        try {
          const result = await run(replica.db);
          counts.count('replica', feature);
          return result;
        } catch (err) {
          // Whatever went wrong there (connection refused, recovery conflict, timeout), the primary answers.
          fallbacks++;
          replica.lastOkAt = 0;
          logger?.warn({ replica: replica.name, err }, 'read failed on a replica; answered by the primary');
        }
      }
      counts.count('primary', feature);
      return run(primary);
    },
    stats() {
      const now = Date.now();
      return {
        ...counts.snapshot(),
        fallbacks,
        probes: { ...probes },
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
