// Owns the shared store: three ioredis clients per instance (data, publish, subscribe) when CACHE_URL is set —
// plain connections to one Redis, or Cluster clients (one connection per master each) with CACHE_CLUSTER=true —
// or an in-process store for the embedded single-instance default.
import { Cluster, type ClusterNode, type Command, Redis } from 'ioredis';
import { createTurnBatch } from './turn-batch.js';

/** A client of either shape: the real-time layer only uses commands both have. */
export type StoreClient = Redis | Cluster;

export interface Store {
  kind: 'redis' | 'memory';
  /** Prefix applied to every key and channel so several deployments (or test files) can share one Redis. */
  prefix: string;
  /**
   * One key's value. On a single Redis the reads asked for in one turn of the event loop go out together, as one
   * MGET at the end of the turn (like `incrWindow`'s windows); a read is sent no sooner than asked, so it sees the
   * store at least as new as a GET sent at once would have.
   */
  get(key: string): Promise<string | null>;
  /**
   * The same read, sent at once instead of joining the auto-pipeline: for a low-rate check on a latency-critical
   * path (a chat send re-checking its session), which would otherwise wait for the pipeline in flight to return.
   */
  getNow(key: string): Promise<string | null>;
  set(key: string, value: string, ttlMs?: number): Promise<void>;
  del(...keys: string[]): Promise<void>;
  /** Atomically reads and deletes a key (one-time tokens). */
  getdel(key: string): Promise<string | null>;
  /**
   * Atomically increments a counter, setting its lifetime on first use; returns the value and ms left. The
   * windows counted in one turn of the event loop go to Redis together, at the end of the turn; `now` sends this
   * one at once instead, for a latency-critical path (a chat send's throttle), like `getNow`.
   */
  incrWindow(key: string, windowMs: number, now?: boolean): Promise<{ count: number; ttlMs: number }>;
  ping(): Promise<void>;
  isReady(): boolean;
  close(): Promise<void>;
  /** Present only for the Redis store; the real-time layer uses the publish and subscribe connections. */
  redis?: { data: StoreClient; pub: StoreClient; sub: StoreClient; cluster: boolean };
}

// KEYS[i] counted in its window ARGV[i], in order (a key twice is counted twice, as two calls would): the counts
// and the ms left, flattened. One call carries every window counted in one turn of the event loop (incrWindow).
const INCR_WINDOWS = `
local out = {}
for i, key in ipairs(KEYS) do
  local w = ARGV[i]
  local n = redis.call('INCR', key)
  if n == 1 then redis.call('PEXPIRE', key, w) end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then redis.call('PEXPIRE', key, w); ttl = tonumber(w) end
  out[#out + 1] = n
  out[#out + 1] = ttl
end
return out`;

/** Windows counted by one script call at most (one call must not hold Redis for long). */
const WINDOW_BATCH_MAX = 256;

/** Keys read by one MGET at most: a session record is ~1.5 KB, so one reply stays within a few hundred KB. */
const READ_BATCH_MAX = 256;

export interface StoreOptions {
  /** One URL, or with `cluster` a comma-separated list of seed nodes. */
  url?: string;
  /** Redis Cluster (CACHE_CLUSTER): ioredis' Cluster client, sharded pub/sub for the bus. */
  cluster?: boolean;
  prefix: string;
  /** Bound on every command; a command that takes longer fails and its connection is re-established. */
  commandTimeoutMs?: number;
  onError?: (role: string, err: Error) => void;
}

export const COMMAND_TIMEOUT_MESSAGE = 'Command timed out';

/**
 * A connection whose command timed out is dropped and re-established. ioredis only rejects the late command; the
 * connection itself would stay "ready", so nothing else (the bus's degraded mode, readiness checks) would notice
 * a stalled store. Reconnecting turns a stall into an ordinary outage: `close`/`reconnecting` degrade the bus,
 * commands fail fast while the ready check waits, and `ready` (the store answering again) recovers it.
 */
class BoundedRedis extends Redis {
  private dropping = false;
  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    const result = super.sendCommand(command, stream);
    command.promise.catch((err: unknown) => {
      if (!(err instanceof Error) || err.message !== COMMAND_TIMEOUT_MESSAGE || this.dropping) return;
      if (this.status !== 'ready') return;
      this.dropping = true;
      this.emit('error', new Error('store command timed out: reconnecting'));
      this.disconnect(true);
      this.once('ready', () => {
        this.dropping = false;
      });
    });
    return result;
  }
}

export function createStore(options: StoreOptions): Store {
  if (!options.url) return createMemoryStore(options.prefix);
  return options.cluster ? createClusterStore(options.url, options) : createRedisStore(options.url, options);
}

// Capped exponential backoff; never give up, the degraded mode covers the gap.
const backoff = (times: number) => Math.min(100 * 2 ** Math.min(times, 6), 5_000);

/** Seed nodes and shared credentials/TLS from CACHE_URL's comma-separated list (validated by config). */
export function parseClusterUrls(list: string): {
  nodes: ClusterNode[];
  username?: string;
  password?: string;
  tls: boolean;
} {
  const urls = list
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean)
    .map((u) => new URL(u));
  const withAuth = urls.find((u) => u.password || u.username);
  return {
    nodes: urls.map((u) => ({ host: u.hostname, port: Number(u.port || 6379) })),
    username: withAuth?.username ? decodeURIComponent(withAuth.username) : undefined,
    password: withAuth?.password ? decodeURIComponent(withAuth.password) : undefined,
    tls: urls.some((u) => u.protocol === 'rediss:'),
  };
}

/**
 * Redis Cluster: the same three roles, each a Cluster client. The data and publish clients hold one connection
 * per master (opened on first use); the subscribe client additionally holds one sharded-subscriber connection
 * per master that owns a bus channel. Commands route by key slot, so every multi-key command, transaction and
 * script here and in the real-time layer keeps its keys in one slot (hash tags, docs/architecture.md).
 * The stalled-command reconnect of BoundedRedis has no cluster equivalent; the bus's probe (realtime/redis-bus.ts)
 * detects a stalled or failed shard instead.
 */
function createClusterStore(list: string, options: StoreOptions): Store {
  const seeds = parseClusterUrls(list);
  const make = (role: 'data' | 'pub' | 'sub') => {
    const conn = new Cluster(seeds.nodes, {
      clusterRetryStrategy: backoff,
      enableOfflineQueue: role !== 'data',
      shardedSubscribers: role === 'sub',
      // Failover takes the cluster a few node timeouts; retry moved/down slots in small steps meanwhile.
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      retryDelayOnTryAgain: 200,
      slotsRefreshTimeout: 2_000,
      // Picks up a promoted replica even when no command hit the failed shard.
      slotsRefreshInterval: 5_000,
      redisOptions: {
        connectionName: `herald-${role}`,
        commandTimeout: options.commandTimeoutMs,
        maxRetriesPerRequest: 1,
        username: seeds.username,
        password: seeds.password,
        tls: seeds.tls ? {} : undefined,
      },
    });
    conn.on('error', (err: Error) => options.onError?.(role, err));
    conn.on('node error', (err: Error) => options.onError?.(role, err));
    return conn;
  };
  const data = make('data');
  const pub = make('pub');
  const sub = make('sub');
  return redisStoreOver({ data, pub, sub, cluster: true }, options.prefix);
}

function createRedisStore(url: string, options: StoreOptions): Store {
  const make = (role: 'data' | 'pub' | 'sub') => {
    const conn = new BoundedRedis(url, {
      connectionName: `herald-${role}`,
      // The subscriber only waits for messages; its (re)subscribe is bounded like any command.
      commandTimeout: options.commandTimeoutMs,
      // Capped exponential backoff; never give up, the degraded mode covers the gap.
      retryStrategy: backoff,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: role !== 'data',
      lazyConnect: false,
      // Commands issued in the same tick (concurrent requests' session and unread-count reads) go out in one
      // write: under load, one socket write per command cost more than the commands themselves.
      enableAutoPipelining: role === 'data',
      // …but ioredis keeps one auto-pipeline in flight per connection, so a command waits for the previous
      // pipeline's round trip first. Scripts (the rate-limit windows, one call per turn; cache versions, one per write)
      // and MGET (`getNow`) skip it: on the chat send path this halved the store checks' wait under load
      // (docs/performance.md, chat at 2,000 sockets).
      autoPipeliningIgnoredCommands: ['eval', 'mget'],
    });
    // Without a listener ioredis would emit 'error' unhandled and crash the process during an outage.
    conn.on('error', (err: Error) => options.onError?.(role, err));
    return conn;
  };
  return redisStoreOver(
    { data: make('data'), pub: make('pub'), sub: make('sub'), cluster: false },
    options.prefix,
  );
}

function redisStoreOver(clients: NonNullable<Store['redis']>, p: string): Store {
  const { data, pub, sub } = clients;
  // The per-client limits count two windows per request (address and user), each a script, and scripts skip the
  // auto-pipeline: two writes and two commands per request, a third of a small route's cost with the default
  // configuration (docs/performance.md, "Per-client limits"). Every window counted in one turn of the event loop
  // (the requests that one read of the sockets brought) goes out as one script instead, with the same counts as
  // one call per window in that order. On a cluster the keys sit in different slots: one call per window there.
  const windows = createTurnBatch(async (group: { key: string; windowMs: string }[]) => {
    const flat = (await data.eval(
      INCR_WINDOWS,
      group.length,
      ...group.map((w) => w.key),
      ...group.map((w) => w.windowMs),
    )) as number[];
    return group.map((_, i) => ({ count: Number(flat[2 * i]), ttlMs: Number(flat[2 * i + 1]) }));
  }, WINDOW_BATCH_MAX);
  // Reads: every authenticated request reads its session record (the get-session fast path also the user's
  // revocation mark), each a GET of its own. In ioredis a command costs 12–15 µs of CPU beyond its reply (its
  // object, promise, timeout timer and a share of the auto-pipeline), against 2–4 µs per key of an MGET
  // (docs/performance.md "Reads of one turn as one MGET"). So the reads of one turn go out as one MGET, sent at the
  // end of the turn outside the auto-pipeline (autoPipeliningIgnoredCommands). A cluster keeps one GET per key:
  // keys of different slots cannot share an MGET.
  const reads = createTurnBatch((keys: string[]) => data.mget(...keys), READ_BATCH_MAX);
  return {
    kind: 'redis',
    prefix: p,
    redis: clients,
    get(key) {
      return clients.cluster ? data.get(p + key) : reads.add(p + key);
    },
    async getNow(key) {
      // MGET of one key is GET outside the auto-pipeline (see autoPipeliningIgnoredCommands); in a cluster one key
      // is one slot, so it routes like GET.
      const [value] = await data.mget(p + key);
      return value ?? null;
    },
    async set(key, value, ttlMs) {
      if (ttlMs) await data.set(p + key, value, 'PX', ttlMs);
      else await data.set(p + key, value);
    },
    async del(...keys) {
      if (keys.length === 0) return;
      // A cluster refuses a multi-key DEL across slots; unrelated keys (repairs, sessions) are deleted one by one.
      if (clients.cluster) await Promise.all(keys.map((k) => data.del(p + k)));
      else await data.del(...keys.map((k) => p + k));
    },
    async getdel(key) {
      return data.getdel(p + key);
    },
    incrWindow(key, windowMs, now) {
      const window = { key: p + key, windowMs: String(windowMs) };
      return now || clients.cluster ? windows.now(window) : windows.add(window);
    },
    async ping() {
      await data.ping();
    },
    isReady() {
      return data.status === 'ready';
    },
    async close() {
      await Promise.allSettled([data.quit(), pub.quit(), sub.quit()]);
      data.disconnect();
      pub.disconnect();
      sub.disconnect();
    },
  };
}

function createMemoryStore(prefix: string): Store {
  const values = new Map<string, { value: string; expiresAt: number }>();
  const read = (key: string) => {
    const entry = values.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      values.delete(key);
      return undefined;
    }
    return entry;
  };
  // Lazy expiry plus a periodic sweep so abandoned keys (rate-limit windows) do not accumulate.
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [k, v] of values) if (v.expiresAt <= now) values.delete(k);
  }, 60_000);
  sweep.unref();
  return {
    kind: 'memory',
    prefix,
    async get(key) {
      return read(key)?.value ?? null;
    },
    async getNow(key) {
      return read(key)?.value ?? null;
    },
    async set(key, value, ttlMs) {
      values.set(key, { value, expiresAt: ttlMs ? Date.now() + ttlMs : Number.POSITIVE_INFINITY });
    },
    async del(...keys) {
      for (const k of keys) values.delete(k);
    },
    async getdel(key) {
      const entry = read(key);
      values.delete(key);
      return entry?.value ?? null;
    },
    async incrWindow(key, windowMs) {
      const now = Date.now();
      const entry = read(key);
      if (!entry) {
        values.set(key, { value: '1', expiresAt: now + windowMs });
        return { count: 1, ttlMs: windowMs };
      }
      entry.value = String(Number(entry.value) + 1);
      return { count: Number(entry.value), ttlMs: entry.expiresAt - now };
    },
    async ping() {},
    isReady() {
      return true;
    },
    async close() {
      clearInterval(sweep);
      values.clear();
    },
  };
}
