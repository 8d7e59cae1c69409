// Owns the cluster registry: every HEARTBEAT_INTERVAL_MS this instance writes its record (a hash with a
// REGISTRY_TTL_MS lifetime) and its score in a sorted set ordered by last heartbeat; instances silent for
// DEAD_INSTANCE_MS are removed with their presence by whichever survivor notices first.
import type { Logger } from '../infra/logger.js';
import type { StoreClient } from '../infra/store.js';
import type { RealtimeKeys } from './keys.js';
import type { InstanceRecord } from './types.js';

export type { InstanceRecord } from './types.js';

export interface Registry {
  /** One heartbeat: write the record, refresh presence lifetimes, clean dead instances. Never rejects. */
  beat(): Promise<void>;
  /** Live instances (heartbeat within DEAD_INSTANCE_MS and record present), this one included. */
  list(): Promise<InstanceRecord[]>;
  deregister(): Promise<void>;
  start(): void;
  stop(): void;
}

export interface RegistryOptions {
  redis: StoreClient;
  keys: RealtimeKeys;
  instanceId: string;
  startedAt: number;
  heartbeatMs: number;
  ttlMs: number;
  deadMs: number;
  logger: Logger;
  connectedClients(): number;
  /** False while degraded: heartbeats are skipped (they would fail anyway). */
  isAvailable(): boolean;
  /**
   * Republishes this instance's presence: called when our record was missing (first beat, expiry during an
   * outage, removal by a survivor after a long pause) or when `presenceDirty()` says a write was lost.
   */
  resyncPresence(): Promise<void>;
  presenceDirty(): boolean;
  /** Survivors removed dead instances (their presence vanished with them). */
  onInstancesRemoved(ids: string[]): void;
}

// KEYS: the instances set, the record and the four presence keys (one slot: all carry the `{rt}` tag).
// Removes a dead instance only if it is still silent (its score did not move since we looked).
const REMOVE_DEAD = `
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return 1`;

export function createRegistry(o: RegistryOptions): Registry {
  const { redis, keys, instanceId } = o;
  let timer: NodeJS.Timeout | undefined;
  let beating: Promise<void> | undefined;
  let stopped = false;

  const self = (): InstanceRecord => ({
    instanceId,
    startedAt: o.startedAt,
    lastHeartbeat: Date.now(),
    connectedClients: o.connectedClients(),
  });

  const removeDead = async (now: number) => {
    const threshold = now - o.deadMs;
    const candidates = (await redis.zrangebyscore(keys.instances, '-inf', threshold)).filter(
      (id) => id !== instanceId,
    );
    const removed: string[] = [];
    for (const id of candidates) {
      const result = await redis.eval(
        REMOVE_DEAD,
        6,
        keys.instances,
        keys.instance(id),
        ...keys.presenceKeys(id),
        id,
        String(threshold),
      );
      if (result === 1) removed.push(id);
    }
    if (removed.length > 0) {
      o.logger.warn({ instances: removed }, 'removed dead instances and their presence');
      o.onInstancesRemoved(removed);
    }
  };

  const beatOnce = async () => {
    if (stopped || !o.isAvailable()) return;
    const record = self();
    const tx = redis.multi();
    tx.zadd(keys.instances, record.lastHeartbeat, instanceId);
    tx.hset(keys.instance(instanceId), {
      instanceId,
      startedAt: record.startedAt,
      lastHeartbeat: record.lastHeartbeat,
      connectedClients: record.connectedClients,
    });
    tx.pexpire(keys.instance(instanceId), o.ttlMs);
    for (const key of keys.presenceKeys(instanceId)) tx.pexpire(key, o.ttlMs);
    const results = await tx.exec();
    const added = results?.[1]?.[1];
    // HSET reports the number of new fields: any means the record did not exist before this beat.
    if ((typeof added === 'number' && added > 0) || o.presenceDirty()) await o.resyncPresence();
    await removeDead(record.lastHeartbeat);
  };

  const registry: Registry = {
    beat() {
      beating ??= beatOnce()
        .catch((err: unknown) =>
          o.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'heartbeat failed'),
        )
        .finally(() => {
          beating = undefined;
        });
      return beating;
    },
    async list() {
      if (!o.isAvailable()) return [self()];
      const ids = await redis.zrangebyscore(keys.instances, Date.now() - o.deadMs, '+inf');
      if (ids.length === 0) return [];
      const pipeline = redis.pipeline();
      for (const id of ids) pipeline.hgetall(keys.instance(id));
      const results = (await pipeline.exec()) ?? [];
      const records: InstanceRecord[] = [];
      for (const [err, value] of results) {
        if (err || !value || typeof value !== 'object') continue;
        const h = value as Record<string, string>;
        if (!h.instanceId) continue;
        records.push({
          instanceId: h.instanceId,
          startedAt: Number(h.startedAt),
          lastHeartbeat: Number(h.lastHeartbeat),
          connectedClients: Number(h.connectedClients),
        });
      }
      return records.sort((a, b) => a.instanceId.localeCompare(b.instanceId));
    },
    async deregister() {
      registry.stop();
      await beating;
      if (redis.status !== 'ready') return;
      await redis
        .multi()
        .zrem(keys.instances, instanceId)
        .del(keys.instance(instanceId), ...keys.presenceKeys(instanceId))
        .exec();
    },
    start() {
      if (timer || stopped) return;
      const tick = () => {
        registry.beat().catch(() => {});
      };
      tick();
      timer = setInterval(tick, o.heartbeatMs);
      timer.unref();
    },
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
  return registry;
}
