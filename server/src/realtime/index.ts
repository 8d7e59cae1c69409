// Builds the real-time core for one instance. Distributed (CACHE_URL set and ENABLE_DISTRIBUTED_CHAT on): the
// Redis bus with its degraded fallback, the cluster registry and presence in the store. Otherwise: the
// in-process bus and local presence, and the registry lists this instance alone.
import type { Config } from '../config.js';
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { type Bus, createMemoryBus } from './bus.js';
import { realtimeKeys } from './keys.js';
import { createPresence, type PresenceCore } from './presence.js';
import { createRedisBus } from './redis-bus.js';
import { createRegistry } from './registry.js';
import type { InstanceRecord, Realtime, UserDisconnect } from './types.js';

// The door: features, auth and ops import the real-time core only from here.
export type { Bus, Envelope } from './bus.js';
export { openSse, type SseConnection, sseBody, sseIdLine } from './sse.js';
export { registerRealtimeTestRoutes } from './test-routes.js';
export type {
  ChatRole,
  InstanceRecord,
  Presence,
  PresenceCounts,
  Realtime,
  UserDisconnect,
} from './types.js';

export interface RealtimeDeps {
  config: Config;
  store: Store;
  logger: Logger;
  /** Receives each bus message's delivery latency (the Prometheus histogram). */
  onBusLatencySeconds?: (seconds: number) => void;
}

export interface RealtimeCore extends Realtime {
  presence: PresenceCore;
  /** Waits (bounded) for the store and starts heartbeats. Never rejects: without a store it starts degraded. */
  start(): Promise<void>;
  /** Shutdown step (phase remove-presence, registered by the composition root); idempotent, never rejects. */
  removePresence(): Promise<void>;
  /** Shutdown step (phase deregister): leaves the registry and closes the bus; idempotent, never rejects. */
  deregister(): Promise<void>;
  /** Removes presence, deregisters and closes the bus; idempotent (the shutdown phases call the same steps). */
  close(): Promise<void>;
}

export const USER_DISCONNECT_TOPIC = 'rt.user.disconnect';

function isUserDisconnect(value: unknown): value is UserDisconnect {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.userId === 'string' &&
    v.userId.length > 0 &&
    v.userId.length <= 255 &&
    typeof v.reason === 'string' &&
    v.reason.length <= 100 &&
    (v.sessionId === undefined || (typeof v.sessionId === 'string' && v.sessionId.length <= 255))
  );
}

export function createRealtime({ config, store, logger, onBusLatencySeconds }: RealtimeDeps): RealtimeCore {
  const startedAt = Date.now();
  const instanceId = config.INSTANCE_ID;
  const connections = config.distributed ? store.redis : undefined;
  const keys = realtimeKeys(store.prefix, { cluster: store.redis?.cluster === true });
  const log = logger.child({ component: 'realtime' });

  const redisBus = connections
    ? createRedisBus({
        instanceId,
        pub: connections.pub,
        sub: connections.sub,
        watch: [connections.data],
        channel: keys.channel,
        sharded: connections.cluster,
        maxPayloadBytes: config.BUS_MAX_PAYLOAD_BYTES,
        dedupWindowMs: config.DEDUP_WINDOW_MS,
        logger: log,
        onLatencySeconds: onBusLatencySeconds,
      })
    : undefined;
  const bus: Bus =
    redisBus ?? createMemoryBus(instanceId, (topic, err) => log.error({ topic, err }, 'bus handler failed'));
  const available = () => connections !== undefined && !bus.isDegraded();

  const presence = createPresence({
    instanceId,
    redis: connections?.data ?? null,
    keys,
    bus,
    debounceMs: config.PRESENCE_DEBOUNCE_MS,
    deadMs: config.DEAD_INSTANCE_MS,
    ttlMs: config.REGISTRY_TTL_MS,
    logger: log,
    isAvailable: available,
  });

  const registry = connections
    ? createRegistry({
        redis: connections.data,
        keys,
        instanceId,
        startedAt,
        heartbeatMs: config.HEARTBEAT_INTERVAL_MS,
        ttlMs: config.REGISTRY_TTL_MS,
        deadMs: config.DEAD_INSTANCE_MS,
        logger: log,
        connectedClients: () => presence.localChatConnections(),
        isAvailable: available,
        resyncPresence: () => presence.resync(),
        presenceDirty: () => presence.isDirty(),
        onInstancesRemoved: () => presence.instancesRemoved(),
      })
    : undefined;

  if (redisBus) {
    redisBus.onRecovered(() => {
      // Order matters little: both are idempotent. The beat re-registers; resync republishes presence.
      Promise.all([registry?.beat(), presence.resync()])
        .then(() => presence.refresh())
        .catch((err: unknown) => log.warn({ err }, 'recovery step failed'));
    });
    redisBus.onDegraded(() => {
      presence.refresh().catch(() => {});
    });
  }

  const disconnectHandlers = new Set<(event: UserDisconnect) => void>();
  bus.subscribe(USER_DISCONNECT_TOPIC, (payload) => {
    if (!isUserDisconnect(payload)) {
      log.warn('invalid user disconnection message dropped');
      return;
    }
    for (const handler of disconnectHandlers) {
      try {
        handler(payload);
      } catch (err) {
        log.error({ err }, 'user disconnection handler failed');
      }
    }
  });

  let removed: Promise<void> | undefined;
  const removePresence = () => {
    removed ??= presence.remove().catch((err: unknown) => log.warn({ err }, 'presence removal failed'));
    return removed;
  };
  let deregistered: Promise<void> | undefined;
  const deregister = () => {
    deregistered ??= (async () => {
      try {
        await registry?.deregister();
        log.info({ instanceId }, 'instance deregistered');
      } catch (err) {
        log.warn({ err }, 'deregistration failed');
      }
      presence.close();
      await bus.close();
    })();
    return deregistered;
  };

  const self = (): InstanceRecord => ({
    instanceId,
    startedAt,
    lastHeartbeat: Date.now(),
    connectedClients: presence.localChatConnections(),
  });

  return {
    bus,
    presence,
    distributed: connections !== undefined,
    startedAt,
    async disconnectUser(event) {
      await bus.publish(USER_DISCONNECT_TOPIC, event);
    },
    onUserDisconnect(handler) {
      disconnectHandlers.add(handler);
      return () => disconnectHandlers.delete(handler);
    },
    onRecovered(handler) {
      return redisBus ? redisBus.onRecovered(handler) : () => false;
    },
    onDegraded(handler) {
      return redisBus ? redisBus.onDegraded(handler) : () => false;
    },
    async instances() {
      if (!registry) return [self()];
      try {
        const list = await registry.list();
        return list.some((r) => r.instanceId === instanceId) ? list : [...list, self()];
      } catch {
        return [self()];
      }
    },
    async start() {
      if (!connections) {
        if (store.kind === 'redis' && !config.ENABLE_DISTRIBUTED_CHAT) {
          log.warn('ENABLE_DISTRIBUTED_CHAT is off: chat and notification fan-out stay on this instance');
        }
        return;
      }
      await redisBus?.start();
      if (bus.isDegraded()) log.warn('store not reachable at start-up: starting in degraded mode');
      registry?.start();
    },
    removePresence,
    deregister,
    async close() {
      await removePresence();
      await deregister();
    },
  };
}
