// Owns the shared store: exactly three ioredis connections per instance (data, publish, subscribe) when
// CACHE_URL is set, or an in-process store for the embedded single-instance default.
import { type Command, Redis } from 'ioredis';

export interface Store {
  kind: 'redis' | 'memory';
  /** Prefix applied to every key and channel so several deployments (or test files) can share one Redis. */
  prefix: string;
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlMs?: number): Promise<void>;
  del(...keys: string[]): Promise<void>;
  /** Atomically reads and deletes a key (one-time tokens). */
  getdel(key: string): Promise<string | null>;
  /** Atomically increments a counter, setting its lifetime on first use; returns the value and ms left. */
  incrWindow(key: string, windowMs: number): Promise<{ count: number; ttlMs: number }>;
  ping(): Promise<void>;
  isReady(): boolean;
  close(): Promise<void>;
  /** Present only for the Redis store; the real-time layer uses the publish and subscribe connections. */
  redis?: { data: Redis; pub: Redis; sub: Redis };
}

const INCR_WINDOW = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}`;

export interface StoreOptions {
  url?: string;
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
  return options.url ? createRedisStore(options.url, options) : createMemoryStore(options.prefix);
}

function createRedisStore(url: string, options: StoreOptions): Store {
  const make = (role: 'data' | 'pub' | 'sub') => {
    const conn = new BoundedRedis(url, {
      connectionName: `herald-${role}`,
      // The subscriber only waits for messages; its (re)subscribe is bounded like any command.
      commandTimeout: options.commandTimeoutMs,
      // Capped exponential backoff; never give up, the degraded mode covers the gap.
      retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5_000),
      maxRetriesPerRequest: 1,
      enableOfflineQueue: role !== 'data',
      lazyConnect: false,
      // Commands issued in the same tick (concurrent requests' session and unread-count reads) go out in one
      // write: under load, one socket write per command cost more than the commands themselves.
      enableAutoPipelining: role === 'data',
    });
    // Without a listener ioredis would emit 'error' unhandled and crash the process during an outage.
    conn.on('error', (err: Error) => options.onError?.(role, err));
    return conn;
  };
  const data = make('data');
  const pub = make('pub');
  const sub = make('sub');
  const p = options.prefix;
  return {
    kind: 'redis',
    prefix: p,
    redis: { data, pub, sub },
    async get(key) {
      return data.get(p + key);
    },
    async set(key, value, ttlMs) {
      if (ttlMs) await data.set(p + key, value, 'PX', ttlMs);
      else await data.set(p + key, value);
    },
    async del(...keys) {
      if (keys.length > 0) await data.del(...keys.map((k) => p + k));
    },
    async getdel(key) {
      return data.getdel(p + key);
    },
    async incrWindow(key, windowMs) {
      const [count, ttlMs] = (await data.eval(INCR_WINDOW, 1, p + key, String(windowMs))) as [number, number];
      return { count, ttlMs };
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
