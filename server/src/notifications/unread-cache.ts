// Owns the per-user read cache in the shared store (the unread count and the serialised first list page), with
// versioned invalidation (design: docs/architecture.md "Unread count cache" and "First-page cache").
import { BoundedMap } from '../infra/bounded-map.js';
import type { Logger } from '../infra/logger.js';
import { PRIMARY_ONLY, type WalPosition } from '../infra/read-replicas.js';
import type { Store, StoreClient } from '../infra/store.js';
import { createTurnBatch } from '../infra/turn-batch.js';
import type { Counts } from './schemas.js';

export interface UnreadCache {
  /** The cached count, or the database count (cached when safe). Never stale after invalidate() returned. */
  get(userId: string): Promise<number>;
  /**
   * The serialised first list page of `signature` (the query it answers), from the cache when it is current,
   * else from `load` (then cached for the next reader unless a change came in between). Never stale after
   * invalidate() returned.
   */
  page(
    userId: string,
    signature: string,
    load: (position: WalPosition | null) => Promise<string>,
  ): Promise<string>;
  /**
   * The WAL position a read of the user's notifications must see (read replicas, docs/architecture.md "Read
   * replicas"): the primary's position after the user's last change, recorded by invalidate(); null when none is
   * recorded; PRIMARY_ONLY when it cannot be known (store unreachable, a bump still pending).
   */
  position(userId: string): Promise<WalPosition | null>;
  /**
   * An uncached list page of `filter` (no type, no search) and the total it is out of. `load` reads at the
   * position it is given (as `page`'s does) and gets the total when the cache holds it under the user's current
   * version, so its statement need not count; a total that `load` counted is kept for the next page, under the
   * version read before the load (docs/architecture.md "List totals and counts").
   */
  pageWithTotal<T>(
    userId: string,
    filter: TotalFilter,
    load: (position: WalPosition | null, total: number | null) => Promise<{ value: T; total: number }>,
  ): Promise<T>;
  /**
   * The user's counts (`GET /notification/counts`): from the cache while they were read under the current
   * version, else from `load` (reading at the position it is given), then kept with the totals they give unless a
   * change came in between (docs/architecture.md "List totals and counts"). Never stale after invalidate() returned.
   */
  counts(userId: string, load: (position: WalPosition | null) => Promise<Counts>): Promise<Counts>;
  /**
   * Call after the transaction that changed these users' notifications (any change) has committed. With read
   * replicas, also records the primary's WAL position (read now, so at or after that commit) with each user's
   * version, in the same script call.
   */
  invalidate(userIds: string[]): Promise<void>;
  close(): void;
}

/** The list filters whose totals the cache can answer: the unread count it keeps, and the count of all. */
export type TotalFilter = 'all' | 'read' | 'unread';

/** The totals held for a user under the current version (null: not known). */
interface Totals {
  all: number | null;
  unread: number | null;
}

/** A filter's total from the held ones (read = all − unread). */
export function totalOf(filter: TotalFilter, t: Totals): number | null {
  if (filter === 'all') return t.all;
  if (filter === 'unread') return t.unread;
  return t.all !== null && t.unread !== null ? t.all - t.unread : null;
}

/** What a counted total of `filter` teaches, given what was held: the other figure follows when one was known. */
export function learnedTotals(filter: TotalFilter, counted: number, t: Totals): Totals {
  if (filter === 'all') return { all: counted, unread: null };
  if (filter === 'unread') return { all: null, unread: counted };
  return {
    all: t.unread !== null ? counted + t.unread : null,
    unread: t.all !== null ? t.all - counted : null,
  };
}

// Long enough to be useful, short enough that an abandoned user's key does not live forever.
const KEY_TTL_MS = 24 * 60 * 60 * 1000;

// The expiry is set only when the key has none (a hash this write creates): a key whose change position is unknown
// keeps the short life BUMP_WITH_POSITION gave it, so its reads leave the primary once the replicas have the change.
const SET_IF_VERSION = `
local v = redis.call('HGET', KEYS[1], 'v') or '0'
if v == ARGV[1] then
  redis.call('HSET', KEYS[1], 'c', ARGV[2])
  if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
  return 1
end
return 0`;

// The total of all a user's notifications is field `a`, stored as `<version>:<count>`, and the counts by status and
// type field `k`, as `<version>:<json>`; each is used only while the version is still that one: an instance of an
// older release bumps versions without knowing these fields (a rolling upgrade), and the tag keeps what it leaves
// behind unusable. The unread count (`c`) is set here too when a page or the counts taught it. The key's expiry
// is only set when it has none, so a short life set by BUMP_WITH_POSITION is kept.
// ARGV: version, total of all ('' = unknown), unread count (''), TTL ms, counts JSON ('').
const SET_FIELDS_IF_VERSION = `
local v = redis.call('HGET', KEYS[1], 'v') or '0'
if v ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'a', v .. ':' .. ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'c', ARGV[3]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'k', v .. ':' .. ARGV[5]) end
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1`;

/** The text of a field tagged `<version>:<text>` when it was stored under `version`, else null. */
function tagged(field: string | null | undefined, version: string): string | null {
  if (!field) return null;
  const at = field.indexOf(':');
  return at > 0 && field.slice(0, at) === version ? field.slice(at + 1) : null;
}

const numberOrNull = (text: string | null | undefined): number | null =>
  text === null || text === undefined ? null : Number(text);

// Bumps every key it is given: a broadcast batch invalidates its users in one script call instead of one per
// user (docs/architecture.md "Broadcast at scale").
// A version that does not exist yet starts at the server's clock in microseconds, not at 0: if the hash is ever
// lost (eviction under maxmemory, a flush) while a cached page tagged with an old version survives, the new
// versions are far above it and that page can never match again.
const BUMP = `
local t = redis.call('TIME')
local base = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
for _, key in ipairs(KEYS) do
  redis.call('HSETNX', key, 'v', base)
  redis.call('HINCRBY', key, 'v', 1)
  redis.call('HDEL', key, 'c', 'a', 'k')
  redis.call('PEXPIRE', key, ARGV[1])
end
return #KEYS`;

// Gives a user who has no version yet one (from the clock, as BUMP does) and returns the current version: a page
// is only cached under a version that exists in the store.
const INIT_VERSION = `
local t = redis.call('TIME')
if redis.call('HSETNX', KEYS[1], 'v', t[1] .. string.rep('0', 6 - #t[2]) .. t[2]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return redis.call('HGET', KEYS[1], 'v')`;

// Read replicas: ARGV[2] is the WAL position of the change ('' without replicas), kept in field `l` when it is newer
// than the one there (fixed-width hex compares as a string). The PRIMARY_ONLY sentinel (position unknown) wins over
// any position and shortens the key's life to ARGV[3]: once the key is gone, every replica within the lag bound has
// replayed the change, and a fresh version from the clock keeps older cached pages unusable.
const BUMP_WITH_POSITION = `
local t = redis.call('TIME')
local base = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
local p = ARGV[2]
local sentinel = '${PRIMARY_ONLY}'
for _, key in ipairs(KEYS) do
  redis.call('HSETNX', key, 'v', base)
  redis.call('HINCRBY', key, 'v', 1)
  redis.call('HDEL', key, 'c', 'a', 'k')
  local ttl = ARGV[1]
  if p ~= '' then
    local cur = redis.call('HGET', key, 'l')
    if p == sentinel or (not cur) or cur == sentinel or cur < p then
      redis.call('HSET', key, 'l', p)
    end
    if redis.call('HGET', key, 'l') == sentinel then ttl = ARGV[3] end
  end
  redis.call('PEXPIRE', key, ttl)
end
return #KEYS`;

// Keys per script call: bounded so one call never blocks Redis for long.
const BUMP_CHUNK = 1_000;

// KEYS[i]'s fields ARGV[i] (comma-separated), each HMGET's answer in the order asked: the hash reads of one turn of
// the event loop (one per counted or listed request) in one call (infra/turn-batch.ts).
const HMGET_MANY = `
local out = {}
for i, key in ipairs(KEYS) do
  local fields = {}
  for f in string.gmatch(ARGV[i], '[^,]+') do fields[#fields + 1] = f end
  out[i] = redis.call('HMGET', key, unpack(fields))
end
return out`;

/** Hash reads sent by one HMGET_MANY call at most. */
const HMGET_BATCH_MAX = 256;

// A cached first page lives this long after it was read from PostgreSQL: it serves a bell that polls, and a
// user who left stops costing memory soon (about 7 KiB per user for 20 notifications).
const PAGE_TTL_MS = 2 * 60 * 1000;
/** Pages kept by the in-process variant (no shared store). */
const LOCAL_PAGES = 10_000;
/**
 * Users whose entry (version, unread count, totals, counts, change position) the in-process variant keeps: about
 * 0.4 KiB each with the counts, so at most ~40 MiB. A dropped user's next read counts again.
 */
const LOCAL_ENTRIES = 100_000;
/** Life of a user's cache key whose change position is unknown (PRIMARY_ONLY): beyond any replica lag bound. */
const UNKNOWN_POSITION_TTL_MS = 65_000;

/**
 * A cached page is stored as `<version>|<signature>|<json>`: it is served only while the user's version is still
 * the one read BEFORE the page was loaded from PostgreSQL, so a write needs no script (and works across cluster
 * slots) and an entry written late by a slow reader can never be served after a bump.
 */
function pageEntry(version: string, signature: string, json: string): string {
  return `${version}|${signature}|${json}`;
}

function pageHit(entry: string | null | undefined, version: string, signature: string): string | null {
  if (!entry) return null;
  const head = `${version}|${signature}|`;
  return entry.startsWith(head) ? entry.slice(head.length) : null;
}

export interface UnreadCacheDeps {
  store: Store;
  logger: Logger;
  countFromDb: (userId: string) => Promise<number>;
  /** The primary's WAL position after a commit (ReadRouter.writePosition); absent or null: no replicas. */
  writePosition?: () => Promise<WalPosition | null>;
  /** The in-process variant's bound on user entries (LOCAL_ENTRIES); tests make it small. */
  localEntries?: number;
}

export function createUnreadCache(deps: UnreadCacheDeps): UnreadCache {
  const redis = deps.store.redis?.data;
  return redis
    ? createRedisUnreadCache(redis, deps.store.redis?.cluster === true, deps.store.prefix, deps)
    : createLocalUnreadCache(deps);
}

function createRedisUnreadCache(
  redis: StoreClient,
  cluster: boolean,
  prefix: string,
  deps: UnreadCacheDeps,
): UnreadCache {
  const { logger, countFromDb } = deps;
  // One key per user: on a cluster the counters spread over every shard by their own name, no hash tag needed (and
  // the name stays the same for a rolling upgrade). A batch bump is one multi-key script on one Redis, one
  // single-key script per user on a cluster (keys of different users live in different slots).
  const key = (userId: string) => `${prefix}notif:unread:${userId}`;
  // The page has a key of its own (its own, shorter TTL); its version is checked against the counter's hash.
  // Without the prefix: read through `store.get`, which adds it and joins the turn's MGET.
  const pageName = (userId: string) => `notif:page:${userId}`;
  // Users whose bump failed (store down). Until each is bumped, their cache is bypassed on this instance and
  // retried in the background; the bump lands before any reader on any instance can see a stale value
  // as soon as the store is back, because every cached entry of theirs predates the change.
  const pending = new Set<string>();
  let retryTimer: NodeJS.Timeout | undefined;
  // A request's single hash read joins the turn's one script call on a single Redis (an HMGET of its own cost ioredis
  // 12–15 µs of CPU besides its reply); a cluster keeps one HMGET per user, whose keys sit in different slots.
  const hashReads = cluster
    ? undefined
    : createTurnBatch(
        async (group: { key: string; fields: string }[]) =>
          (await redis.eval(
            HMGET_MANY,
            group.length,
            ...group.map((g) => g.key),
            ...group.map((g) => g.fields),
          )) as (string | null)[][],
        HMGET_BATCH_MAX,
      );
  const hmget = (userId: string, ...fields: string[]): Promise<(string | null)[]> =>
    hashReads
      ? hashReads.add({ key: key(userId), fields: fields.join(',') })
      : redis.hmget(key(userId), ...fields);

  const bump = async (userIds: string[], position: WalPosition | null) => {
    // Without replicas the script stays the one it always was (no position field, no extra work per key).
    const script = position === null ? BUMP : BUMP_WITH_POSITION;
    const args =
      position === null
        ? [String(KEY_TTL_MS)]
        : [String(KEY_TTL_MS), position, String(UNKNOWN_POSITION_TTL_MS)];
    if (cluster) {
      // One script per user, all sent before the first reply (ioredis writes them back to back): a multi-key script
      // or a pipeline would be refused by a cluster as soon as two users hash to different slots.
      const results = await Promise.allSettled(userIds.map((id) => redis.eval(script, 1, key(id), ...args)));
      const failed = userIds.filter((_, i) => results[i]?.status === 'rejected');
      if (failed.length > 0) throw new Error(`unread cache bump failed for ${failed.length} users`);
      return;
    }
    const pipeline = redis.pipeline();
    for (let i = 0; i < userIds.length; i += BUMP_CHUNK) {
      const keys = userIds.slice(i, i + BUMP_CHUNK).map(key);
      pipeline.eval(script, keys.length, ...keys, ...args);
    }
    const results = (await pipeline.exec()) ?? [];
    const failed = results.filter((r) => r[0]).length;
    if (failed > 0) throw new Error(`unread cache bump failed for ${failed} of ${results.length} key groups`);
  };

  // What a read taught, kept under the version read before it. Not awaited: the answer does not wait for the
  // cache, and a failed write only means a later read counts again.
  const keep = (userId: string, version: string, totals: Totals, countsJson: string) => {
    const text = (n: number | null) => (n === null ? '' : String(n));
    redis
      .eval(
        SET_FIELDS_IF_VERSION,
        1,
        key(userId),
        version,
        text(totals.all),
        text(totals.unread),
        String(KEY_TTL_MS),
        countsJson,
      )
      .catch(() => {});
  };

  const scheduleRetry = () => {
    if (retryTimer) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      const ids = [...pending];
      if (ids.length === 0) return;
      // The position of the original change is lost: PRIMARY_ONLY (if replicas are on) is the safe one.
      bump(ids, deps.writePosition ? PRIMARY_ONLY : null).then(
        () => {
          for (const id of ids) pending.delete(id);
        },
        () => scheduleRetry(),
      );
    }, 1_000);
    retryTimer.unref();
  };

  return {
    async get(userId) {
      if (pending.has(userId)) return countFromDb(userId);
      let version: string;
      try {
        const [v, c] = await hmget(userId, 'v', 'c');
        if (c !== null && c !== undefined) return Number(c);
        version = v ?? '0';
      } catch {
        return countFromDb(userId);
      }
      const count = await countFromDb(userId);
      try {
        await redis.eval(SET_IF_VERSION, 1, key(userId), version, String(count), String(KEY_TTL_MS));
      } catch {
        // Not cached this time; the next reader tries again.
      }
      return count;
    },
    async page(userId, signature, load) {
      if (pending.has(userId)) return load(PRIMARY_ONLY);
      let version: string;
      let position: WalPosition | null;
      try {
        // Sent together, each with its turn's other reads (the hash read's script call, the store's MGET): one round
        // trip. Their order does not matter: an entry is served only under the version it was stored with, which
        // was read before its page was loaded, so an entry read before or after the version is never older than
        // it. The position comes with the version, so a page loaded from a replica that has replayed it is at least
        // as new as that version.
        const [[v, l], entry] = await Promise.all([
          hmget(userId, 'v', 'l'),
          deps.store.get(pageName(userId)),
        ]);
        position = l ?? null;
        if (v === null || v === undefined) {
          version = String(await redis.eval(INIT_VERSION, 1, key(userId), String(KEY_TTL_MS)));
        } else {
          version = v;
          const hit = pageHit(entry, version, signature);
          if (hit !== null) return hit;
        }
      } catch {
        return load(PRIMARY_ONLY);
      }
      const json = await load(position);
      try {
        await redis.set(prefix + pageName(userId), pageEntry(version, signature, json), 'PX', PAGE_TTL_MS);
      } catch {
        // Not cached this time; the next reader tries again.
      }
      return json;
    },
    async position(userId) {
      if (pending.has(userId)) return PRIMARY_ONLY;
      try {
        const [l] = await hmget(userId, 'l');
        return l ?? null;
      } catch {
        return PRIMARY_ONLY;
      }
    },
    async pageWithTotal(userId, filter, load) {
      if (pending.has(userId)) return (await load(PRIMARY_ONLY, null)).value;
      let fields: (string | null)[];
      try {
        fields = await hmget(userId, 'v', 'c', 'a', 'l');
      } catch {
        return (await load(PRIMARY_ONLY, null)).value;
      }
      const [v, c, a, l] = fields;
      const version = v ?? '0';
      const held: Totals = { all: numberOrNull(tagged(a, version)), unread: numberOrNull(c) };
      const known = totalOf(filter, held);
      const { value, total } = await load(l ?? null, known);
      if (known === null) {
        const learned = learnedTotals(filter, total, held);
        if (learned.all !== null || learned.unread !== null) keep(userId, version, learned, '');
      }
      return value;
    },
    async counts(userId, load) {
      if (pending.has(userId)) return load(PRIMARY_ONLY);
      let version: string;
      let position: WalPosition | null;
      try {
        const [v, k, l] = await hmget(userId, 'v', 'k', 'l');
        version = v ?? '0';
        position = l ?? null;
        const hit = tagged(k, version);
        if (hit !== null) return JSON.parse(hit) as Counts;
      } catch {
        return load(PRIMARY_ONLY);
      }
      const counts = await load(position);
      const { all, unread } = counts.byStatus;
      keep(userId, version, { all, unread }, JSON.stringify(counts));
      return counts;
    },
    async invalidate(userIds) {
      if (userIds.length === 0) return;
      const position = deps.writePosition ? await deps.writePosition() : null;
      try {
        await bump(userIds, position);
      } catch (err) {
        logger.warn({ err, users: userIds.length }, 'unread cache invalidation failed; retrying');
        for (const id of userIds) pending.add(id);
        scheduleRetry();
      }
    },
    close() {
      clearTimeout(retryTimer);
    },
  };
}

/** In-process store (single instance): the same versioning, made atomic by the single thread. */
function createLocalUnreadCache(deps: UnreadCacheDeps): UnreadCache {
  const { countFromDb } = deps;
  // `l`: the WAL position of the user's last change (read replicas), as in the store's hash.
  // `a`: the total of all, `k`: the counts, dropped with `c` by every change.
  type Entry = { v: number; c?: number; a?: number; k?: Counts; l?: WalPosition };
  // Pages are large next to a count: at most LOCAL_PAGES are kept, the oldest written dropped first.
  const pages = new BoundedMap<string>(LOCAL_PAGES);
  // Every version comes from this one counter, so a user's version never returns to a value it had, even once
  // their entry was dropped and they start again from `absent`.
  let clock = 0;
  // The version of a user without an entry. It moves on at each drop: a load that began before its user's entry
  // was dropped can then never store what it read under the version that user has now.
  let absent = 0;
  // Read replicas: the newest change position among the dropped entries. A user without an entry reads at it,
  // since their own last change may be among them (and an unknown one routes to the primary for the replica lag
  // bound, as the store's short-lived key does).
  let droppedAt: WalPosition | null = null;
  let droppedUnknownUntil = 0;
  // Bounded like the pages (issue 27's note: the entries grew with every user ever seen until a restart).
  const entries = new BoundedMap<Entry>(deps.localEntries ?? LOCAL_ENTRIES, (userId, dropped) => {
    absent = ++clock;
    pages.delete(userId);
    if (dropped.l === PRIMARY_ONLY) droppedUnknownUntil = Date.now() + UNKNOWN_POSITION_TTL_MS;
    else if (dropped.l && (droppedAt === null || droppedAt < dropped.l)) droppedAt = dropped.l;
  });
  /** The user's entry, or what a user without one starts from (not stored). */
  const current = (userId: string): Entry => {
    const entry = entries.get(userId);
    if (entry) return entry;
    const l = Date.now() < droppedUnknownUntil ? PRIMARY_ONLY : droppedAt;
    return l ? { v: absent, l } : { v: absent };
  };
  return {
    async get(userId) {
      const entry = current(userId);
      if (entry.c !== undefined) return entry.c;
      const count = await countFromDb(userId);
      const now = current(userId);
      // Spread: the entry keeps its change position (read replicas) and total.
      if (now.v === entry.v) entries.set(userId, { ...now, c: count });
      return count;
    },
    async page(userId, signature, load) {
      const entry = current(userId);
      const hit = pageHit(pages.get(userId), String(entry.v), signature);
      if (hit !== null) return hit;
      const json = await load(entry.l ?? null);
      const now = current(userId);
      if (now.v === entry.v) {
        // A user without an entry gets one: the page's version is then theirs until a change or a drop.
        if (!entries.has(userId)) entries.set(userId, now);
        pages.set(userId, pageEntry(String(now.v), signature, json));
      }
      return json;
    },
    async position(userId) {
      return current(userId).l ?? null;
    },
    async pageWithTotal(userId, filter, load) {
      const entry = current(userId);
      const held: Totals = { all: entry.a ?? null, unread: entry.c ?? null };
      const known = totalOf(filter, held);
      const { value, total } = await load(entry.l ?? null, known);
      const now = current(userId);
      if (known === null && now.v === entry.v) {
        const learned = learnedTotals(filter, total, held);
        entries.set(userId, {
          ...now,
          ...(learned.all === null ? {} : { a: learned.all }),
          ...(learned.unread === null ? {} : { c: learned.unread }),
        });
      }
      return value;
    },
    async counts(userId, load) {
      const entry = current(userId);
      if (entry.k) return entry.k;
      const counts = await load(entry.l ?? null);
      const now = current(userId);
      if (now.v === entry.v)
        entries.set(userId, { ...now, k: counts, a: counts.byStatus.all, c: counts.byStatus.unread });
      return counts;
    },
    async invalidate(userIds) {
      const position = deps.writePosition ? await deps.writePosition() : null;
      for (const id of userIds) {
        const before = current(id);
        const newer = !before.l || before.l === PRIMARY_ONLY || (position !== null && before.l < position);
        const l = position !== null && newer ? position : before.l;
        entries.set(id, { v: ++clock, ...(l ? { l } : {}) });
        pages.delete(id);
      }
    },
    close() {
      entries.clear();
      pages.clear();
    },
  };
}
