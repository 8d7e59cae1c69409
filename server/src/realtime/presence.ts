// Owns presence: who holds a notification stream and the chat counts, per instance in the store and summed over
// live instances (design: docs/architecture.md "Real-time core").
import type { Logger } from '../infra/logger.js';
import type { StoreClient } from '../infra/store.js';
import type { Bus } from './bus.js';
import type { RealtimeKeys } from './keys.js';
import type { ChatRole, Presence, PresenceCounts } from './types.js';

export const PRESENCE_TOPIC = 'rt.presence';

export interface PresenceCore extends Presence {
  /** Rewrites this instance's presence keys from local state (start, recovery, record found missing). */
  resync(): Promise<void>;
  /** Recomputes cluster counts now and tells handlers if they changed. */
  refresh(): Promise<void>;
  /** Schedules a debounced recount (another instance changed). */
  scheduleRefresh(): void;
  /**
   * Dead instances were removed: every instance recounts, not only the one that noticed, since connects are
   * greeted from each instance's last counts and would otherwise keep the dead one's users until the next change.
   */
  instancesRemoved(): void;
  /** A store write failed since the last resync. */
  isDirty(): boolean;
  /** Deletes this instance's presence from the store (shutdown) and stops writing. */
  remove(): Promise<void>;
  close(): void;
}

export interface PresenceOptions {
  instanceId: string;
  /** Null for the single-instance mode: local state only. */
  redis: StoreClient | null;
  keys: RealtimeKeys;
  bus: Bus;
  debounceMs: number;
  deadMs: number;
  ttlMs: number;
  logger: Logger;
  /** False while degraded. */
  isAvailable(): boolean;
}

// Every key reaches the scripts through KEYS (Redis Cluster routes and checks by them; all share the `{rt}` tag).
// The caller lists candidate ids first (ZRANGEBYSCORE); the script re-checks each one's score and record, so an
// instance that died in between is not counted. One that registered in between is missed by this count only: its
// first presence write publishes a recount.
// KEYS[1] instances; per candidate i (ARGV[2 + i]), KEYS from 2 + (i - 1) * STRIDE: record, then presence keys.
// ARGV[1] liveness threshold (epoch ms), ARGV[2] number of candidates.

// Union of members/admins sets and sum of guests over live instances. STRIDE 5: record, online, members, admins,
// guests.
const CLUSTER_COUNTS = `
local guests, nm, na = 0, 0, 0
local members, admins = {}, {}
for i = 1, tonumber(ARGV[2]) do
  local k = 2 + (i - 1) * 5
  local score = redis.call('ZSCORE', KEYS[1], ARGV[2 + i])
  if score and tonumber(score) >= tonumber(ARGV[1]) and redis.call('EXISTS', KEYS[k]) == 1 then
    guests = guests + (tonumber(redis.call('GET', KEYS[k + 4])) or 0)
    for _, u in ipairs(redis.call('SMEMBERS', KEYS[k + 2])) do
      if not members[u] then members[u] = true; nm = nm + 1 end
    end
    for _, u in ipairs(redis.call('SMEMBERS', KEYS[k + 3])) do
      if not admins[u] then admins[u] = true; na = na + 1 end
    end
  end
end
return {guests, nm, na}`;

// The subset of the users (ARGV after the candidates) present in the online set of any live instance. STRIDE 2:
// record, online.
const ONLINE_AMONG = `
local n = tonumber(ARGV[2])
local live = {}
for i = 1, n do
  local k = 2 + (i - 1) * 2
  local score = redis.call('ZSCORE', KEYS[1], ARGV[2 + i])
  if score and tonumber(score) >= tonumber(ARGV[1]) and redis.call('EXISTS', KEYS[k]) == 1 then
    live[#live + 1] = KEYS[k + 1]
  end
end
local out = {}
for j = 3 + n, #ARGV do
  local u = ARGV[j]
  for _, key in ipairs(live) do
    if redis.call('SISMEMBER', key, u) == 1 then
      out[#out + 1] = u
      break
    end
  end
end
return out`;

const CHUNK = 1_000;

function chunks<T>(items: T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export function createPresence(o: PresenceOptions): PresenceCore {
  const { redis, keys, instanceId, logger } = o;
  const online = new Map<string, number>();
  const chat = new Map<string, { role: ChatRole; userId: string | null }>();
  /** Distinct signed-in chat users by role: userId → local connection count. */
  const chatUsers = { member: new Map<string, number>(), admin: new Map<string, number>() };
  let guests = 0;
  const handlers = new Set<(counts: PresenceCounts) => void>();
  let last: PresenceCounts | undefined;
  /** The first recount, shared by connects arriving before any refresh has run (right after start). */
  let firstCount: Promise<void> | undefined;
  let flushTimer: NodeJS.Timeout | undefined;
  let refreshTimer: NodeJS.Timeout | undefined;
  let closed = false;
  /** A store write failed: the next resync (heartbeat or recovery) repairs it. */
  let dirty = false;

  const remote = () => redis !== null && !closed && o.isAvailable();
  const onWriteError = (err: unknown) => {
    dirty = true;
    logger.debug({ err: err instanceof Error ? err.message : String(err) }, 'presence write failed');
  };

  const localCounts = (): PresenceCounts => ({
    guests,
    members: chatUsers.member.size,
    admins: chatUsers.admin.size,
  });

  const emit = (counts: PresenceCounts) => {
    if (
      last &&
      last.guests === counts.guests &&
      last.members === counts.members &&
      last.admins === counts.admins
    ) {
      return;
    }
    last = counts;
    for (const handler of handlers) {
      try {
        handler(counts);
      } catch (err) {
        logger.error({ err }, 'presence handler failed');
      }
    }
  };

  /** Instances with a recent heartbeat, and the liveness threshold the scripts re-check them against. */
  const candidates = async (client: StoreClient) => {
    const threshold = String(Date.now() - o.deadMs);
    return { threshold, ids: await client.zrangebyscore(keys.instances, threshold, '+inf') };
  };

  const clusterCounts = async (): Promise<PresenceCounts> => {
    if (!remote() || !redis) return localCounts();
    const { threshold, ids } = await candidates(redis);
    const perInstance = ids.flatMap((id) => [keys.instance(id), ...keys.presenceKeys(id)]);
    const [g, m, a] = (await redis.eval(
      CLUSTER_COUNTS,
      1 + perInstance.length,
      keys.instances,
      ...perInstance,
      threshold,
      String(ids.length),
      ...ids,
    )) as [number, number, number];
    return { guests: g, members: m, admins: a };
  };

  const refresh = async () => {
    if (closed) return;
    try {
      emit(await clusterCounts());
    } catch {
      emit(localCounts());
    }
  };

  const scheduleRefresh = () => {
    if (refreshTimer || closed) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = undefined;
      refresh().catch(() => {});
    }, o.debounceMs);
    refreshTimer.unref();
  };

  /** Local chat state changed: write our guest counter and tell everyone (debounced). */
  const chatChanged = () => {
    if (flushTimer || closed) return;
    flushTimer = setTimeout(() => {
      flushTimer = undefined;
      if (!remote() || !redis) {
        emit(localCounts());
        return;
      }
      redis
        .multi()
        .set(keys.guests(instanceId), String(guests), 'PX', o.ttlMs)
        .exec()
        .then(() => o.bus.publish(PRESENCE_TOPIC, { instanceId }))
        .catch(onWriteError);
    }, o.debounceMs);
    flushTimer.unref();
  };

  const setMember = (key: string, userId: string, present: boolean) => {
    if (!remote() || !redis) return;
    const op = present ? redis.sadd(key, userId) : redis.srem(key, userId);
    op.catch(onWriteError);
  };

  const bump = (map: Map<string, number>, id: string, delta: 1 | -1): boolean => {
    const n = (map.get(id) ?? 0) + delta;
    if (n <= 0) {
      map.delete(id);
      return true;
    }
    map.set(id, n);
    return delta === 1 && n === 1;
  };

  const presence: PresenceCore = {
    userConnected(userId) {
      if (bump(online, userId, 1)) setMember(keys.online(instanceId), userId, true);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        if (bump(online, userId, -1)) setMember(keys.online(instanceId), userId, false);
      };
    },
    async isOnline(userId) {
      if (online.has(userId)) return true;
      return (await presence.onlineAmong([userId])).has(userId);
    },
    async onlineAmong(userIds) {
      const found = new Set<string>();
      const rest: string[] = [];
      for (const id of new Set(userIds)) {
        if (online.has(id)) found.add(id);
        else rest.push(id);
      }
      if (rest.length === 0 || !remote() || !redis) return found;
      try {
        const { threshold, ids } = await candidates(redis);
        const perInstance = ids.flatMap((id) => [keys.instance(id), keys.online(id)]);
        for (const part of chunks(rest)) {
          const hits = (await redis.eval(
            ONLINE_AMONG,
            1 + perInstance.length,
            keys.instances,
            ...perInstance,
            threshold,
            String(ids.length),
            ...ids,
            ...part,
          )) as string[];
          for (const id of hits) found.add(id);
        }
      } catch (err) {
        // A store failure must not fail delivery: answer with what this instance knows.
        logger.debug({ err: err instanceof Error ? err.message : String(err) }, 'presence lookup failed');
      }
      return found;
    },
    async onlineUsers() {
      const found = new Set(online.keys());
      if (!remote() || !redis) return [...found];
      try {
        const { ids } = await candidates(redis);
        // A handful of instances: one pipelined SMEMBERS each (every key shares the {rt} tag, so this also holds
        // on Redis Cluster). An instance that died since its last beat still counts here; its users only come
        // first in the order, they are not added to any audience.
        const pipeline = redis.pipeline();
        for (const id of ids) pipeline.smembers(keys.online(id));
        for (const [err, members] of (await pipeline.exec()) ?? []) {
          if (err || !Array.isArray(members)) continue;
          for (const id of members) if (typeof id === 'string') found.add(id);
        }
      } catch (err) {
        logger.debug({ err: err instanceof Error ? err.message : String(err) }, 'presence listing failed');
      }
      return [...found];
    },
    async touch(userId) {
      // Re-asserts a live local stream in the store (repairs it after an outage or a missed write).
      if (online.has(userId)) setMember(keys.online(instanceId), userId, true);
    },
    chatJoin(connectionId, role, userId) {
      if (chat.has(connectionId)) presence.chatLeave(connectionId);
      chat.set(connectionId, { role, userId });
      if (role === 'guest' || !userId) guests++;
      else {
        const kind = role === 'admin' ? 'admin' : 'member';
        if (bump(chatUsers[kind], userId, 1)) {
          setMember(kind === 'admin' ? keys.admins(instanceId) : keys.members(instanceId), userId, true);
        }
      }
      chatChanged();
    },
    chatLeave(connectionId) {
      const entry = chat.get(connectionId);
      if (!entry) return;
      chat.delete(connectionId);
      if (entry.role === 'guest' || !entry.userId) guests = Math.max(0, guests - 1);
      else {
        const kind = entry.role === 'admin' ? 'admin' : 'member';
        if (bump(chatUsers[kind], entry.userId, -1)) {
          setMember(
            kind === 'admin' ? keys.admins(instanceId) : keys.members(instanceId),
            entry.userId,
            false,
          );
        }
      }
      chatChanged();
    },
    async chatCounts() {
      try {
        return await clusterCounts();
      } catch {
        return localCounts();
      }
    },
    async lastChatCounts() {
      if (!remote() || !redis) return localCounts();
      if (last) return last;
      firstCount ??= refresh().finally(() => {
        firstCount = undefined;
      });
      await firstCount;
      return last ?? localCounts();
    },
    onChatCounts(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    localChatConnections: () => chat.size,
    async resync() {
      if (!remote() || !redis) return;
      dirty = false;
      const tx = redis.multi();
      tx.del(...keys.presenceKeys(instanceId));
      for (const part of chunks([...online.keys()])) tx.sadd(keys.online(instanceId), ...part);
      for (const part of chunks([...chatUsers.member.keys()])) tx.sadd(keys.members(instanceId), ...part);
      for (const part of chunks([...chatUsers.admin.keys()])) tx.sadd(keys.admins(instanceId), ...part);
      tx.set(keys.guests(instanceId), String(guests));
      for (const key of keys.presenceKeys(instanceId)) tx.pexpire(key, o.ttlMs);
      try {
        await tx.exec();
        await o.bus.publish(PRESENCE_TOPIC, { instanceId });
      } catch (err) {
        onWriteError(err);
      }
    },
    refresh,
    scheduleRefresh,
    instancesRemoved() {
      if (!remote()) {
        scheduleRefresh();
        return;
      }
      // Local delivery schedules our own recount too; if the publish fails, at least this instance recounts.
      o.bus.publish(PRESENCE_TOPIC, { instanceId }).catch(() => scheduleRefresh());
    },
    isDirty: () => dirty,
    async remove() {
      closed = true;
      clearTimeout(flushTimer);
      clearTimeout(refreshTimer);
      if (redis?.status !== 'ready' || !o.isAvailable()) return;
      await redis.del(...keys.presenceKeys(instanceId));
      // Written directly: the presence module is closed, but others must recount now.
      await o.bus.publish(PRESENCE_TOPIC, { instanceId });
    },
    close() {
      closed = true;
      clearTimeout(flushTimer);
      clearTimeout(refreshTimer);
      handlers.clear();
    },
  };

  // Every instance recounts when anyone's chat presence changes (our own change arrives by local delivery).
  o.bus.subscribe(PRESENCE_TOPIC, () => scheduleRefresh());
  return presence;
}
