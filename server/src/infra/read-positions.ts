// Owns the WAL positions that reads from replicas must see, for features whose changes do not already go through a
// per-user cache (chat; notifications keep theirs in the unread-cache hash, notifications/unread-cache.ts). A change
// records, after its commit and before it is acknowledged or published, the primary's WAL position on named keys
// (a user, a room); a read looks up the keys it depends on and runs through the read router with the newest of them
// (docs/architecture.md, "Read replicas"). Keys live in the shared store, so a read on any instance sees a change
// made on another; without a shared store (one instance) they live in this process.
import { BoundedMap } from './bounded-map.js';
import type { Logger } from './logger.js';
import { PRIMARY_ONLY, type ReadRouter, type WalPosition } from './read-replicas.js';
import type { Store, StoreClient } from './store.js';

export interface ReadPositions {
  /** False without replicas: record() and of() then cost nothing and every read is the primary's. */
  readonly enabled: boolean;
  /**
   * Call after the change committed, before it is acknowledged: reads the primary's WAL position once and keeps it
   * on every key (a key keeps the newest). Never throws; a position that cannot be kept sends these keys' reads to
   * the primary on this instance until it is.
   */
  record(keys: string[]): Promise<void>;
  /**
   * The position a read depending on these keys must see: the newest recorded on any of them; null when none is
   * (every replica within the lag bound will do); PRIMARY_ONLY when it cannot be known (store unreachable).
   */
  of(keys: string[]): Promise<WalPosition | null>;
  /**
   * The store was unreachable (for a while): a change made on another instance meanwhile could not record its
   * position, and that instance's retry may land after this one reads. Every read goes to the primary until
   * DATABASE_READ_MAX_LAG_MS has passed, when every replica allowed to serve has what was committed before now.
   * Also retries this instance's pending recordings at once.
   */
  suspend(): void;
  close(): void;
}

/**
 * How long a key lives after its last recording, past the lag bound: a replica allowed to serve reads has replayed
 * everything committed DATABASE_READ_MAX_LAG_MS ago, so once a key is gone its change is on every replica that can
 * be chosen. The margin covers the position polls' age and a store whose clock runs fast.
 */
const MARGIN_MS = 60_000;
/** Keys kept by the in-process variant (one instance, no shared store). */
const LOCAL_KEYS = 100_000;
const RETRY_MS = 1_000;

// Keeps the newest position (fixed-width hex compares as a string). The PRIMARY_ONLY sentinel is the greatest
// string, so it wins and stays until the key expires; its life is not extended by later changes, so a user whose
// position was once unknown reads from the primary for one key life at most.
const SET_MAX = `
local cur = redis.call('GET', KEYS[1])
if (not cur) or cur < ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
elseif cur ~= '${PRIMARY_ONLY}' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1`;

export interface ReadPositionsOptions {
  store: Store;
  reads: Pick<ReadRouter, 'enabled' | 'writePosition'> | undefined;
  /** Key namespace in the store (`<prefix><namespace>:pos:<key>`), one per feature. */
  namespace: string;
  /** DATABASE_READ_MAX_LAG_MS: keys outlive it (see MARGIN_MS). */
  maxLagMs: number;
  logger: Pick<Logger, 'warn'>;
  /** True while the store is known to be unreachable (the bus's degraded mode): reads then use the primary. */
  storeDown?: () => boolean;
}

const newest = (values: Array<string | null | undefined>): WalPosition | null => {
  let best: WalPosition | null = null;
  for (const v of values) if (v && (best === null || v > best)) best = v;
  return best;
};

export function createReadPositions(options: ReadPositionsOptions): ReadPositions {
  const { reads, logger } = options;
  if (!reads?.enabled) {
    return { enabled: false, record: async () => {}, of: async () => null, suspend() {}, close() {} };
  }
  const ttlMs = options.maxLagMs + MARGIN_MS;
  const redis = options.store.redis?.data;
  const keep = redis
    ? redisKeeper(
        redis,
        options.store.redis?.cluster === true,
        `${options.store.prefix}${options.namespace}:pos:`,
        ttlMs,
      )
    : localKeeper(ttlMs);

  // Keys whose recording failed (store down): their reads go to the primary on this instance, and the retry
  // records PRIMARY_ONLY (the change's own position is not worth keeping: the sentinel covers it).
  const pending = new Set<string>();
  let retryTimer: NodeJS.Timeout | undefined;
  let closed = false;
  let suspendedUntil = 0;
  const retry = () => {
    const keys = [...pending];
    if (keys.length === 0) return;
    keep.set(keys, PRIMARY_ONLY).then(
      () => {
        for (const k of keys) pending.delete(k);
      },
      () => scheduleRetry(),
    );
  };
  const scheduleRetry = () => {
    if (retryTimer || closed) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      retry();
    }, RETRY_MS);
    retryTimer.unref();
  };

  return {
    enabled: true,
    async record(keys) {
      if (keys.length === 0) return;
      const position = (await reads.writePosition()) ?? PRIMARY_ONLY;
      try {
        await keep.set(keys, position);
      } catch (err) {
        logger.warn(
          { err, keys: keys.length },
          'could not record a change position; those reads use the primary until it is',
        );
        for (const k of keys) pending.add(k);
        scheduleRetry();
      }
    },
    async of(keys) {
      if (Date.now() < suspendedUntil || options.storeDown?.()) return PRIMARY_ONLY;
      if (keys.some((k) => pending.has(k))) return PRIMARY_ONLY;
      try {
        return newest(await keep.get(keys));
      } catch {
        return PRIMARY_ONLY;
      }
    },
    suspend() {
      // The polls' age on top of the bound: eligibility is judged from samples up to a poll interval old.
      suspendedUntil = Date.now() + options.maxLagMs + RETRY_MS;
      if (!closed) retry();
    },
    close() {
      closed = true;
      clearTimeout(retryTimer);
    },
  };
}

interface Keeper {
  set(keys: string[], position: WalPosition): Promise<void>;
  get(keys: string[]): Promise<Array<string | null>>;
}

function redisKeeper(redis: StoreClient, cluster: boolean, prefix: string, ttlMs: number): Keeper {
  return {
    async set(keys, position) {
      // One script per key, all sent before the first reply (auto-pipelined on one Redis): a multi-key script
      // would be refused by a cluster whenever two keys hash to different slots.
      await Promise.all(keys.map((k) => redis.eval(SET_MAX, 1, prefix + k, position, String(ttlMs))));
    },
    async get(keys) {
      if (cluster || keys.length === 1) return Promise.all(keys.map((k) => redis.get(prefix + k)));
      return redis.mget(...keys.map((k) => prefix + k));
    },
  };
}

function localKeeper(ttlMs: number): Keeper {
  const entries = new BoundedMap<{ position: WalPosition; until: number }>(LOCAL_KEYS);
  return {
    async set(keys, position) {
      const now = Date.now();
      for (const k of keys) {
        const cur = entries.get(k);
        const live = cur && cur.until > now ? cur : undefined;
        if (!live || live.position < position) entries.set(k, { position, until: now + ttlMs });
        else if (live.position !== PRIMARY_ONLY)
          entries.set(k, { position: live.position, until: now + ttlMs });
      }
    },
    async get(keys) {
      const now = Date.now();
      return keys.map((k) => {
        const cur = entries.get(k);
        return cur && cur.until > now ? cur.position : null;
      });
    },
  };
}
