// Owns the per-user unread-count cache in the shared store, with versioned invalidation (design:
// docs/architecture.md "Unread count cache").
import type { Logger } from '../infra/logger.js';
import type { Store, StoreClient } from '../infra/store.js';

export interface UnreadCache {
  /** The cached count, or the database count (cached when safe). Never stale after invalidate() returned. */
  get(userId: string): Promise<number>;
  /** Call after the transaction that changed these users' unread counts has committed. */
  invalidate(userIds: string[]): Promise<void>;
  close(): void;
}

// Long enough to be useful, short enough that an abandoned user's key does not live forever.
const KEY_TTL_MS = 24 * 60 * 60 * 1000;

const SET_IF_VERSION = `
local v = redis.call('HGET', KEYS[1], 'v') or '0'
if v == ARGV[1] then
  redis.call('HSET', KEYS[1], 'c', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0`;

// Bumps every key it is given: a broadcast batch invalidates its users in one script call instead of one per
// user (docs/architecture.md "Broadcast at scale").
const BUMP = `
for _, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 'v', 1)
  redis.call('HDEL', key, 'c')
  redis.call('PEXPIRE', key, ARGV[1])
end
return #KEYS`;

// Keys per script call: bounded so one call never blocks Redis for long.
const BUMP_CHUNK = 1_000;

export function createUnreadCache(deps: {
  store: Store;
  logger: Logger;
  countFromDb: (userId: string) => Promise<number>;
}): UnreadCache {
  const redis = deps.store.redis?.data;
  return redis
    ? createRedisUnreadCache(
        redis,
        deps.store.redis?.cluster === true,
        deps.store.prefix,
        deps.logger,
        deps.countFromDb,
      )
    : createLocalUnreadCache(deps.countFromDb);
}

function createRedisUnreadCache(
  redis: StoreClient,
  cluster: boolean,
  prefix: string,
  logger: Logger,
  countFromDb: (userId: string) => Promise<number>,
): UnreadCache {
  // One key per user: on a cluster the counters spread over every shard by their own name, no hash tag needed (and
  // the name stays the same for a rolling upgrade). A batch bump is one multi-key script on one Redis, one
  // single-key script per user on a cluster (keys of different users live in different slots).
  const key = (userId: string) => `${prefix}notif:unread:${userId}`;
  // Users whose bump failed (store down). Until each is bumped, their cache is bypassed on this instance and
  // retried in the background; the bump lands before any reader on any instance can see a stale value
  // as soon as the store is back, because every cached entry of theirs predates the change.
  const pending = new Set<string>();
  let retryTimer: NodeJS.Timeout | undefined;

  const bump = async (userIds: string[]) => {
    if (cluster) {
      // One script per user, all sent before the first reply (ioredis writes them back to back): a multi-key script
      // or a pipeline would be refused by a cluster as soon as two users hash to different slots.
      const results = await Promise.allSettled(
        userIds.map((id) => redis.eval(BUMP, 1, key(id), String(KEY_TTL_MS))),
      );
      const failed = userIds.filter((_, i) => results[i]?.status === 'rejected');
      if (failed.length > 0) throw new Error(`unread cache bump failed for ${failed.length} users`);
      return;
    }
    const pipeline = redis.pipeline();
    for (let i = 0; i < userIds.length; i += BUMP_CHUNK) {
      const keys = userIds.slice(i, i + BUMP_CHUNK).map(key);
      pipeline.eval(BUMP, keys.length, ...keys, String(KEY_TTL_MS));
    }
    const results = (await pipeline.exec()) ?? [];
    const failed = results.filter((r) => r[0]).length;
    if (failed > 0) throw new Error(`unread cache bump failed for ${failed} of ${results.length} key groups`);
  };

  const scheduleRetry = () => {
    if (retryTimer) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      const ids = [...pending];
      if (ids.length === 0) return;
      bump(ids).then(
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
        const [v, c] = await redis.hmget(key(userId), 'v', 'c');
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
    async invalidate(userIds) {
      if (userIds.length === 0) return;
      try {
        await bump(userIds);
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
function createLocalUnreadCache(countFromDb: (userId: string) => Promise<number>): UnreadCache {
  const entries = new Map<string, { v: number; c?: number }>();
  return {
    async get(userId) {
      const entry = entries.get(userId);
      if (entry?.c !== undefined) return entry.c;
      const version = entry?.v ?? 0;
      const count = await countFromDb(userId);
      const now = entries.get(userId);
      if ((now?.v ?? 0) === version) entries.set(userId, { v: version, c: count });
      return count;
    },
    async invalidate(userIds) {
      for (const id of userIds) entries.set(id, { v: (entries.get(id)?.v ?? 0) + 1 });
    },
    close() {
      entries.clear();
    },
  };
}
