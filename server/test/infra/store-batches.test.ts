// What the store sends together (infra/store.ts). The fixed-window counter (incrWindow), which every per-key limit
// counts through: the windows counted in one turn of the event loop go to Redis as one script call, with the
// counts one call per window in the same order would give. Reads (get), which every session check goes through:
// the keys read in one turn go as one MGET. A private Redis, so the command statistics are this test's alone.

import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createStore, type Store } from '../../src/infra/store.js';
import { createUnreadCache } from '../../src/notifications/unread-cache.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';
import { startRedisServer, type TestRedis } from '../helpers/redis-server.js';

// One private Redis for the single-Redis blocks (their keys do not overlap).
let redis: TestRedis;
let store: Store;

/** How many times the private Redis has run a command. */
const calls = async (command: string): Promise<number> => {
  const info = String(await store.redis?.data.info('commandstats'));
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
};

beforeAll(async () => {
  redis = await startRedisServer();
  store = createStore({ url: redis.url, prefix: 'batches:', commandTimeoutMs: 2_000 });
  await vi.waitFor(() => expect(store.isReady()).toBe(true));
});

afterAll(async () => {
  await store.close();
  await redis.close();
});

describe('store windows', () => {
  const evals = () => calls('eval');

  it('counts the windows of one turn in one call, as calls in that order would', async () => {
    const before = await evals();
    const results = await Promise.all([
      store.incrWindow('a', 60_000),
      store.incrWindow('b', 60_000),
      store.incrWindow('a', 60_000),
      store.incrWindow('a', 60_000),
      store.incrWindow('b', 60_000),
      store.incrWindow('c', 500),
    ]);
    expect(results.map((r) => r.count)).toEqual([1, 1, 2, 3, 2, 1]);
    for (const r of results.slice(0, 5)) {
      expect(r.ttlMs).toBeGreaterThan(50_000);
      expect(r.ttlMs).toBeLessThanOrEqual(60_000);
    }
    expect(results[5]?.ttlMs).toBeGreaterThan(0);
    expect(results[5]?.ttlMs).toBeLessThanOrEqual(500);
    expect((await evals()) - before).toBe(1);

    // A later turn continues the same windows; a window that ended starts again from 1.
    await new Promise((r) => setTimeout(r, 600));
    const later = await Promise.all([store.incrWindow('a', 60_000), store.incrWindow('c', 500)]);
    expect(later.map((r) => r.count)).toEqual([4, 1]);
    expect((await evals()) - before).toBe(2);
  });

  it('sends a window asked for now at once, ahead of the turn it was asked in', async () => {
    const before = await evals();
    const results = await Promise.all([
      store.incrWindow('now:k', 60_000),
      store.incrWindow('now:other', 60_000),
      store.incrWindow('now:k', 60_000, true),
    ]);
    // The urgent count went out first, in a call of its own; the turn's two windows followed in one call.
    expect(results.map((r) => r.count)).toEqual([2, 1, 1]);
    expect((await evals()) - before).toBe(2);
  });

  it('splits a large turn into bounded calls and keeps every count', async () => {
    const before = await evals();
    const results = await Promise.all(
      Array.from({ length: 600 }, (_, i) => store.incrWindow(`many:${i % 300}`, 60_000)),
    );
    // Each of the 300 keys was counted twice, the first time before the second.
    expect(results.slice(0, 300).every((r) => r.count === 1)).toBe(true);
    expect(results.slice(300).every((r) => r.count === 2)).toBe(true);
    // 600 windows in calls of at most 256.
    expect((await evals()) - before).toBe(3);
  });

  it('fails every window of a call while Redis is down, and counts again once it is back', async () => {
    await redis.stop();
    await vi.waitFor(() => expect(store.isReady()).toBe(false));
    const down = await Promise.allSettled([store.incrWindow('d', 60_000), store.incrWindow('e', 60_000)]);
    expect(down.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    await redis.start();
    await vi.waitFor(() => expect(store.isReady()).toBe(true), { timeout: 10_000 });
    const back = await Promise.all([store.incrWindow('d', 60_000), store.incrWindow('d', 60_000)]);
    expect(back.map((r) => r.count)).toEqual([1, 2]);
  });
});

describe('store reads', () => {
  it('answers the reads of one turn from one MGET per 256 keys, each with its own value', async () => {
    await Promise.all(
      Array.from({ length: 150 }, (_, i) => store.set(`k:${i}`, `value ${i} ${'é'.repeat(i)}`)),
    );
    const [gets, mgets] = [await calls('get'), await calls('mget')];
    // 300 reads: present keys, absent ones and repeats, in an order that is neither.
    const keys = Array.from({ length: 300 }, (_, i) => `k:${(i * 7) % 200}`);
    const values = await Promise.all(keys.map((k) => store.get(k)));
    values.forEach((v, i) => {
      const n = (i * 7) % 200;
      expect(v).toBe(n < 150 ? `value ${n} ${'é'.repeat(n)}` : null);
    });
    expect((await calls('mget')) - mgets).toBe(2);
    expect((await calls('get')) - gets).toBe(0);
    // Reads of a later turn go in a call of their own.
    expect(await store.get('k:3')).toBe(`value 3 ${'é'.repeat(3)}`);
    expect((await calls('mget')) - mgets).toBe(3);
  });

  it('sees a write asked for earlier in the same turn, never an older value', async () => {
    await store.set('w', 'old');
    const set = store.set('w', 'new');
    const read = store.get('w');
    const del = store.del('w');
    await Promise.all([set, del]);
    // Sent no sooner than asked: after the write (and here after the delete that followed it in the same turn).
    expect(await read).not.toBe('old');
    expect(await store.get('w')).toBeNull();
  });

  it("answers the unread cache's hash reads of one turn from one script call", async () => {
    const counted: string[] = [];
    const cache = createUnreadCache({
      store,
      logger: pino({ level: 'silent' }),
      // The database's count, as the service's loader answers it: known per user here.
      countFromDb: async (userId) => {
        counted.push(userId);
        return Number(userId.slice(1));
      },
    });
    try {
      const users = Array.from({ length: 20 }, (_, i) => `u${i}`);
      // First turn: every count misses and is loaded, then kept for the next readers.
      expect(await Promise.all(users.map((u) => cache.get(u)))).toEqual(users.map((_, i) => i));
      expect(counted).toHaveLength(20);
      const [evals, hmgets] = [await calls('eval'), await calls('hmget')];
      // Second turn: every count from the cache, and the positions with them, in one script call.
      const [counts, positions] = await Promise.all([
        Promise.all(users.map((u) => cache.get(u))),
        Promise.all(users.map((u) => cache.position(u))),
      ]);
      expect(counts).toEqual(users.map((_, i) => i));
      expect(positions).toEqual(users.map(() => null));
      expect(counted).toHaveLength(20);
      // Redis counts the HMGETs the script ran too: 40, all inside that one call.
      expect((await calls('eval')) - evals).toBe(1);
      expect((await calls('hmget')) - hmgets).toBe(40);
      // A change is seen by the next read: the count is loaded again.
      await cache.invalidate(['u3']);
      expect(await cache.get('u3')).toBe(3);
      expect(counted).toEqual([...users, 'u3']);
    } finally {
      cache.close();
    }
  });

  it('fails every read of a call while Redis is down, and reads again once it is back', async () => {
    await store.set('r', 'kept');
    await redis.stop();
    await vi.waitFor(() => expect(store.isReady()).toBe(false));
    const down = await Promise.allSettled([store.get('r'), store.get('s')]);
    expect(down.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    await redis.start();
    await vi.waitFor(() => expect(store.isReady()).toBe(true), { timeout: 10_000 });
    await store.set('r', 'again');
    expect(await Promise.all([store.get('r'), store.get('s')])).toEqual(['again', null]);
  });
});

describe('store windows and reads on a Redis Cluster', () => {
  it('counts windows and reads keys that sit in different slots, one call each, with the same answers', async () => {
    const cluster = await startRedisCluster({ masters: 3, replicas: 0 });
    const store = createStore({
      url: cluster.url,
      cluster: true,
      prefix: 'windows:',
      commandTimeoutMs: 2_000,
    });
    try {
      await vi.waitFor(() => expect(store.isReady()).toBe(true), { timeout: 10_000 });
      // Keys spread over the slots of all three masters: one multi-key script would be refused (CROSSSLOT).
      const keys = Array.from({ length: 12 }, (_, i) => `spread:${i}`);
      const first = await Promise.all(keys.map((k) => store.incrWindow(k, 60_000)));
      const second = await Promise.all([...keys, keys[0] ?? ''].map((k) => store.incrWindow(k, 60_000)));
      expect(first.map((r) => r.count)).toEqual(keys.map(() => 1));
      expect(second.map((r) => r.count)).toEqual([...keys.map(() => 2), 3]);
      for (const r of [...first, ...second]) expect(r.ttlMs).toBeGreaterThan(50_000);
      // Reads of keys in different slots in one turn: one MGET would be refused (CROSSSLOT) as well.
      await Promise.all(keys.slice(0, 6).map((k) => store.set(`read:${k}`, k)));
      const read = await Promise.all(keys.map((k) => store.get(`read:${k}`)));
      expect(read).toEqual(keys.map((k, i) => (i < 6 ? k : null)));
    } finally {
      await store.close();
      await cluster.close();
    }
  });
});
