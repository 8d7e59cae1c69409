// Owns revocation convergence: revocation markers, durable store repairs and the per-request revocation scope
// (design: docs/architecture.md "Revocation convergence").
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { eq, inArray } from 'drizzle-orm';
import { BoundedMap } from '../infra/bounded-map.js';
import type { Db } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import { authStoreRepair, session as sessionTable, user as userTable } from '../infra/schema/index.js';
import type { Store } from '../infra/store.js';

/** Prefix of better-auth's keys inside the store (the store adds the deployment prefix). */
export const AUTH_STORE_PREFIX = 'auth:';
const MARKER_PREFIX = `${AUTH_STORE_PREFIX}rv:`;
/** Markers outlive every session they can concern (sessions last at most 7 days). */
const MARKER_TTL_MS = 8 * 24 * 60 * 60 * 1000;
const DRAIN_INTERVAL_MS = 1_000;
const DRAIN_BATCH = 500;

export type SessionStatus = 'live' | 'revoked' | 'banned' | 'expired' | 'unknown';

export interface RevocationScope {
  /** Users whose sessions or account state this request changed; their markers are bumped after it returns. */
  users: Set<string>;
  /** A revocation write could be neither applied nor recorded for later: the request must not report success. */
  failed: boolean;
}

export interface Revocation {
  /**
   * False when the session is revoked, its user banned, or it expired. When neither the store nor the database
   * can be reached it answers true: an outage must not close every connection.
   */
  isSessionLive(userId: string, sessionId: string): Promise<boolean>;
  /** The same check with the reason (chat uses it to pick a close code). */
  sessionStatus(userId: string, sessionId: string): Promise<SessionStatus>;
  /**
   * `isSessionLive` for many sessions at once (SSE convergence re-checks every open stream): the markers in one
   * pipelined round trip, the sessions not verified yet in one database query, instead of one round trip (and on
   * the first pass one query) per session.
   */
  sessionsLive(sessions: ReadonlyArray<{ userId: string; sessionId: string }>): Promise<boolean[]>;
  /** False while store records may be stale (after a store failure, until pending repairs are applied). */
  storeTrusted(): boolean;
  /** Called by readers that saw the store fail: stop trusting it until the next successful drain. */
  storeFailed(): void;
  /** Runs `fn` in a fresh request scope; returns its result and the scope. */
  runScoped<T>(fn: () => Promise<T>): Promise<{ result: T; scope: RevocationScope }>;
  /** The current request's scope, if any. */
  scope(): RevocationScope | undefined;
  /** Records that the current request changed `userId`'s sessions or account (bumped after the request). */
  touched(userId: string): void;
  /**
   * A store write of auth state failed: remember it durably so it is applied once the store is back. Throws (and
   * marks the current request failed) when it cannot be recorded either.
   */
  writeFailed(key: string | null, userId: string | null): Promise<void>;
  /** Bumps the markers of the scope's users (after the request's database changes are committed). */
  commit(scope: RevocationScope): Promise<void>;
  /** Applies pending repairs now (also runs every second); resolves true when none are left. */
  drain(): Promise<boolean>;
  close(): void;
}

export interface RevocationDeps {
  store: Store;
  db: Db;
  logger: Logger;
}

export function markerKey(userId: string): string {
  return MARKER_PREFIX + userId;
}

export function createRevocation({ store, db, logger }: RevocationDeps): Revocation {
  const log = logger.child({ component: 'revocation' });
  const als = new AsyncLocalStorage<RevocationScope>();
  // The in-process store cannot lose writes: nothing to distrust or repair.
  const repairable = store.kind === 'redis';
  let trusted = true;
  let closed = false;
  let draining: Promise<boolean> | undefined;
  /** Store failures seen so far; a drain only restores trust if none happened while it ran. */
  let failures = 0;
  // Both keyed by user AND session: a verdict is about the pair that was checked, so a caller asking about a
  // session id with another user's id can never be answered from a verdict reached for its owner.
  const pairKey = (userId: string, sessionId: string) => `${userId}\n${sessionId}`;
  /** Sessions verified against the database, with the marker value read just before that check. */
  const verified = new BoundedMap<{ marker: string | null; expiresAt: number }>(50_000);
  /** Sessions known to have ended: they never come back. */
  const ended = new BoundedMap<SessionStatus>(50_000);

  const bump = async (userId: string) => {
    const key = markerKey(userId);
    // incrWindow = INCR + PEXPIRE on first use; refresh the lifetime too so an active user's marker persists.
    await store.incrWindow(key, MARKER_TTL_MS);
  };

  const record = async (key: string | null, userId: string | null) => {
    trusted = false;
    await db.insert(authStoreRepair).values({ id: randomUUID(), key, userId });
  };

  const drainOnce = async (): Promise<boolean> => {
    const rows = await db
      .select({ id: authStoreRepair.id, key: authStoreRepair.key, userId: authStoreRepair.userId })
      .from(authStoreRepair)
      .orderBy(authStoreRepair.createdAt)
      .limit(DRAIN_BATCH);
    if (rows.length > 0) {
      const keys = [...new Set(rows.flatMap((r) => (r.key ? [r.key] : [])))];
      if (keys.length > 0) await store.del(...keys);
      for (const userId of new Set(rows.flatMap((r) => (r.userId ? [r.userId] : [])))) await bump(userId);
      await db.delete(authStoreRepair).where(
        inArray(
          authStoreRepair.id,
          rows.map((r) => r.id),
        ),
      );
      log.info({ repairs: rows.length }, 'applied auth store repairs left by a store outage');
    }
    return rows.length < DRAIN_BATCH;
  };

  const drain = (): Promise<boolean> => {
    if (!repairable || closed) return Promise.resolve(true);
    draining ??= (async () => {
      // Read before the work: a failure reported while draining must keep the store distrusted.
      const failuresBefore = failures;
      try {
        let done = false;
        while (!done && !closed) done = await drainOnce();
        if (failures === failuresBefore) trusted = true;
        return true;
      } catch (err) {
        trusted = false;
        log.debug(
          { err: (err as Error).message },
          'auth store repairs pending (store or database unreachable)',
        );
        return false;
      } finally {
        draining = undefined;
      }
    })();
    return draining;
  };

  // Every instance applies repairs, including ones left by an instance that could not reach the store while
  // this one could (a partition), so a stale record is never served for longer than about one interval.
  const timer = repairable
    ? setInterval(() => {
        void drain();
      }, DRAIN_INTERVAL_MS)
    : undefined;
  timer?.unref();

  /**
   * The status of sessions not (or no longer) verified, from the database in one query (plus one for the
   * sessions not found, to tell a ban from a revocation), remembered as `ended` or `verified` under the marker
   * read before the query.
   */
  const fromDatabase = async (
    checks: ReadonlyArray<{ userId: string; sessionId: string; marker: string | null | undefined }>,
  ): Promise<SessionStatus[]> => {
    const rows = await db
      .select({
        id: sessionTable.id,
        userId: sessionTable.userId,
        expiresAt: sessionTable.expiresAt,
        banned: userTable.banned,
        banExpires: userTable.banExpires,
      })
      .from(sessionTable)
      .innerJoin(userTable, eq(userTable.id, sessionTable.userId))
      .where(inArray(sessionTable.id, [...new Set(checks.map((c) => c.sessionId))]));
    const found = new Map(rows.map((r) => [r.id, r]));
    const now = Date.now();
    const isBanned = (u: { banned: boolean | null; banExpires: Date | null }) =>
      Boolean(u.banned) && !(u.banExpires && u.banExpires.getTime() < now);
    // A ban deletes the user's sessions too; tell it apart so clients get the ban's close code (rare path).
    const missingUsers = [
      ...new Set(checks.filter((c) => found.get(c.sessionId)?.userId !== c.userId).map((c) => c.userId)),
    ];
    const banned = new Set<string>();
    if (missingUsers.length > 0) {
      const users = await db
        .select({ id: userTable.id, banned: userTable.banned, banExpires: userTable.banExpires })
        .from(userTable)
        .where(inArray(userTable.id, missingUsers));
      for (const u of users) if (isBanned(u)) banned.add(u.id);
    }
    return checks.map(({ userId, sessionId, marker }) => {
      const row = found.get(sessionId);
      let status: SessionStatus;
      if (!row || row.userId !== userId) status = banned.has(userId) ? 'banned' : 'revoked';
      else if (isBanned(row)) status = 'banned';
      else if (row.expiresAt.getTime() <= now) status = 'expired';
      else status = 'live';
      const key = pairKey(userId, sessionId);
      if (status !== 'live') {
        ended.set(key, status);
        verified.delete(key);
      } else if (marker !== undefined && row) {
        verified.set(key, { marker, expiresAt: row.expiresAt.getTime() });
      }
      return status;
    });
  };

  /** The answer from memory (ended, or verified under the current marker), or undefined: ask the database. */
  const remembered = (
    userId: string,
    sessionId: string,
    marker: string | null | undefined,
  ): SessionStatus | undefined => {
    const key = pairKey(userId, sessionId);
    const end = ended.get(key);
    if (end) return end;
    const known = verified.get(key);
    if (marker === undefined || !known || known.marker !== marker) return undefined;
    if (known.expiresAt > Date.now()) return 'live';
    ended.set(key, 'expired');
    return 'expired';
  };

  const sessionStatus = async (userId: string, sessionId: string): Promise<SessionStatus> => {
    const end = ended.get(pairKey(userId, sessionId));
    if (end) return end;
    // The marker is read before the database, so a revocation committed after this read bumps it past the value
    // remembered below and the next check goes to the database again.
    let marker: string | null | undefined;
    if (trusted) {
      try {
        // Outside the auto-pipeline: every chat write waits on this read (store.getNow).
        marker = await store.getNow(markerKey(userId));
      } catch {
        marker = undefined;
        trusted = false;
      }
    }
    const known = remembered(userId, sessionId, marker);
    if (known) return known;
    try {
      const [status] = await fromDatabase([{ userId, sessionId, marker }]);
      return status ?? 'unknown';
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'session liveness unknown: database unreachable');
      return 'unknown';
    }
  };

  const sessionsLive = async (
    sessions: ReadonlyArray<{ userId: string; sessionId: string }>,
  ): Promise<boolean[]> => {
    const markers = new Map<string, string | null>();
    const users = [
      ...new Set(sessions.filter((c) => !ended.get(pairKey(c.userId, c.sessionId))).map((c) => c.userId)),
    ];
    if (trusted && users.length > 0) {
      try {
        // Issued in one tick: the store's auto-pipeline sends them in one write (a background check: no caller
        // waits on it the way a chat write waits on getNow).
        const values = await Promise.all(users.map((u) => store.get(markerKey(u))));
        users.forEach((u, i) => {
          markers.set(u, values[i] ?? null);
        });
      } catch {
        markers.clear();
        trusted = false;
      }
    }
    const statuses: SessionStatus[] = [];
    const ask: Array<{ i: number; userId: string; sessionId: string; marker: string | null | undefined }> =
      [];
    sessions.forEach(({ userId, sessionId }, i) => {
      const marker = markers.has(userId) ? markers.get(userId) : undefined;
      const known = remembered(userId, sessionId, marker);
      if (known) statuses[i] = known;
      else ask.push({ i, userId, sessionId, marker });
    });
    if (ask.length > 0) {
      try {
        const answers = await fromDatabase(ask);
        ask.forEach(({ i }, k) => {
          statuses[i] = answers[k] ?? 'unknown';
        });
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'session liveness unknown: database unreachable');
        for (const { i } of ask) statuses[i] = 'unknown';
      }
    }
    return statuses.map((status) => status === 'live' || status === 'unknown');
  };

  return {
    sessionStatus,
    sessionsLive,
    async isSessionLive(userId, sessionId) {
      const status = await sessionStatus(userId, sessionId);
      return status === 'live' || status === 'unknown';
    },
    storeTrusted: () => trusted,
    storeFailed() {
      if (!repairable) return;
      trusted = false;
      failures++;
    },
    async runScoped(fn) {
      const scope: RevocationScope = { users: new Set(), failed: false };
      const result = await als.run(scope, fn);
      return { result, scope };
    },
    scope: () => als.getStore(),
    touched(userId) {
      als.getStore()?.users.add(userId);
    },
    async writeFailed(key, userId) {
      failures++;
      try {
        await record(key, userId);
      } catch (err) {
        const scope = als.getStore();
        if (scope) scope.failed = true;
        log.error(
          { err: (err as Error).message },
          'auth store write lost: neither store nor database reachable',
        );
        throw err;
      }
    },
    async commit(scope) {
      for (const userId of scope.users) {
        try {
          await bump(userId);
        } catch {
          failures++;
          try {
            await record(null, userId);
          } catch (err) {
            scope.failed = true;
            log.error(
              { err: (err as Error).message, userId },
              'revocation marker lost: neither store nor database reachable',
            );
          }
        }
      }
    },
    drain,
    close() {
      closed = true;
      if (timer) clearInterval(timer);
    },
  };
}
