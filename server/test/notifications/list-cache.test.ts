// The first-page cache (notifications/unread-cache.ts): a cached page is served byte for byte as PostgreSQL would
// answer, and never once any change to the user's notifications has returned, whichever instance made it.

import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { App } from '../../src/app.js';
import { PRIMARY_ONLY } from '../../src/infra/read-replicas.js';
import { createStore } from '../../src/infra/store.js';
import { type Counts, NOTIFICATION_TYPES } from '../../src/notifications/schemas.js';
import {
  createUnreadCache,
  learnedTotals,
  type TotalFilter,
  totalOf,
} from '../../src/notifications/unread-cache.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { TEST_REDIS_URL } from '../helpers/env.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { seed } from '../helpers/seed.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const DAY = 24 * 60 * 60 * 1000;

interface ListBody {
  notifications: Array<{ id: string; read: boolean; title: string }>;
  pagination: { totalCount: number; totalPages: number; hasNextPage: boolean };
}

describe('first-page cache', () => {
  let env: TestEnv;
  let a: App;
  let b: App;

  beforeAll(async () => {
    env = await createTestEnv({ RETENTION_MAX_AGE_DAYS: '30', RETENTION_MAX_PER_USER: '1000' });
    [a, b] = await Promise.all([env.app(), env.app()]);
  });
  afterAll(() => env.close());

  const list = async (app: App, u: TestUser, query = 'limit=5') => {
    const res = await app.inject({
      method: 'GET',
      url: `/notification/list?${query}`,
      headers: jsonHeaders(u.cookie),
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-store');
    return { text: res.body, body: res.json() as ListBody };
  };
  const change = async (app: App, u: TestUser, method: 'PATCH' | 'DELETE', url: string, payload?: object) => {
    const res = await app.inject({
      method,
      url,
      headers: payload ? jsonHeaders(u.cookie) : { origin: 'http://localhost:3000', cookie: u.cookie },
      ...(payload ? { payload } : {}),
    });
    expect(res.statusCode, res.body).toBe(200);
  };
  const cachedEntry = (u: TestUser) => a.ctx.store.get(`notif:page:${u.id}`);

  it('serves the stored bytes PostgreSQL answered, for the default first page and each read filter', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    await seed(
      a,
      u.id,
      Array.from({ length: 12 }, (_, i) => ({ read: i % 3 === 0, title: `t${i} <b>&"'` })),
    );
    const first = await list(a, u);
    const entry = await cachedEntry(u);
    expect(entry, 'the first read stores the page').toMatch(/^\d+\|all:5\|\{/);
    expect(entry?.endsWith(first.text)).toBe(true);
    // A hit (same bytes), on this instance and on the other.
    expect((await list(a, u)).text).toBe(first.text);
    expect((await list(b, u)).text).toBe(first.text);
    // Later pages and filtered queries are not cached and agree with the cached page on the figures.
    const page2 = await list(a, u, 'limit=5&page=2');
    expect(page2.body.pagination.totalCount).toBe(12);
    expect(first.body.pagination).toMatchObject({ totalCount: 12, totalPages: 3, hasNextPage: true });
    // Another signature replaces the entry and answers its own query, never the other's.
    const unread = await list(a, u, 'filter=unread&limit=5');
    expect(unread.body.notifications.every((n) => !n.read)).toBe(true);
    expect(unread.body.pagination.totalCount).toBe(8);
    expect(await cachedEntry(u)).toMatch(/^\d+\|unread:5\|/);
    expect((await list(b, u, 'filter=unread&limit=5')).text).toBe(unread.text);
    expect((await list(b, u)).text).toBe(first.text);
    expect((await list(b, u, 'limit=6')).body.notifications).toHaveLength(6);
  });

  it('drops the page on every change, made through either instance', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    // Seeded oldest first: n5 is the newest, n2 the only read one.
    const past = Date.now() - 60_000;
    await seed(
      a,
      u.id,
      Array.from({ length: 6 }, (_, i) => ({ read: i === 2, title: `n${i}`, createdAt: new Date(past + i) })),
    );
    const [newest] = (await list(a, u)).body.notifications.map((n) => n.id);

    // Read and unread a notification on B: A's next page shows it.
    await change(b, u, 'PATCH', `/notification/${newest}/read`, { read: true });
    expect((await list(a, u)).body.notifications[0]).toMatchObject({ id: newest, read: true });
    await change(b, u, 'PATCH', `/notification/${newest}/read`, { read: false });
    expect((await list(a, u)).body.notifications[0]).toMatchObject({ id: newest, read: false });

    // Deleting a READ notification does not change the unread count, and still changes the page.
    const readOne = (await list(a, u)).body.notifications.find((n) => n.read);
    expect(readOne).toBeDefined();
    await change(b, u, 'DELETE', `/notification/${readOne?.id}`);
    const afterDelete = (await list(a, u)).body;
    expect(afterDelete.notifications.map((n) => n.id)).not.toContain(readOne?.id);
    expect(afterDelete.pagination.totalCount).toBe(5);

    // A notification created on B is first on A.
    const created = await b.notifications.createForUser(u.id, {
      type: 'info',
      title: 'fresh',
      content: 'just now',
    });
    expect((await list(a, u)).body.notifications[0]?.id).toBe(created.id);

    // Mark all read, then delete all.
    await change(b, u, 'PATCH', '/notification/mark-all-read');
    expect((await list(a, u)).body.notifications.every((n) => n.read)).toBe(true);
    await change(b, u, 'DELETE', '/notification/delete-all');
    expect((await list(a, u)).body).toMatchObject({ notifications: [], pagination: { totalCount: 0 } });
  });

  it('drops the page when retention deletes read rows (the unread count does not move)', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    await seed(a, u.id, [
      { title: 'old and read', read: true, createdAt: new Date(Date.now() - 60 * DAY) },
      { title: 'recent', createdAt: new Date(Date.now() - 1000) },
    ]);
    expect((await list(a, u)).body.pagination.totalCount).toBe(2);
    const result = await b.ctx.housekeeping.runOnce();
    expect(result.expiredDeleted).toBeGreaterThanOrEqual(1);
    const after = (await list(a, u)).body;
    expect(after.notifications.map((n) => n.title)).toEqual(['recent']);
    expect(after.pagination.totalCount).toBe(1);
  });

  it('later pages take their total from the cache, exact after every change on either instance', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    const past = Date.now() - 60_000;
    // 12 rows, 4 of them read (i = 0, 3, 6, 9).
    await seed(
      a,
      u.id,
      Array.from({ length: 12 }, (_, i) => ({
        read: i % 3 === 0,
        title: `p${i}`,
        createdAt: new Date(past + i),
      })),
    );
    const redis = a.ctx.store.redis?.data;
    if (!redis) throw new Error('the test environment has a shared store');
    const key = `${a.ctx.store.prefix}notif:unread:${u.id}`;
    const totals = async (app: App) =>
      Object.fromEntries(
        await Promise.all(
          (['all', 'unread', 'read'] as const).map(
            async (filter) =>
              [
                filter,
                (await list(app, u, `limit=5&page=2&filter=${filter}`)).body.pagination.totalCount,
              ] as const,
          ),
        ),
      );

    expect(await totals(a)).toEqual({ all: 12, unread: 8, read: 4 });
    // What the pages counted is kept under the version they read with: the total tagged, the unread count plain.
    const version = await redis.hget(key, 'v');
    await vi.waitFor(async () =>
      expect(await redis.hmget(key, 'a', 'c')).toEqual([`${version ?? '0'}:12`, '8']),
    );
    // The next page's total comes from there (a planted figure proves it is read, then is put back).
    await redis.hset(key, 'a', `${version ?? '0'}:99`);
    expect((await list(b, u, 'limit=5&page=2')).body.pagination).toMatchObject({
      totalCount: 99,
      totalPages: 20,
    });
    expect((await list(b, u, 'limit=5&page=2&filter=read')).body.pagination.totalCount).toBe(99 - 8);
    await redis.hset(key, 'a', `${version ?? '0'}:12`);
    // The rows of a page whose total is known are the rows of a counted one.
    expect((await list(b, u, 'limit=5&page=2&filter=read')).body.notifications.map((n) => n.title)).toEqual(
      [],
    );
    expect((await list(b, u, 'limit=3&page=2&filter=read')).body.notifications.map((n) => n.title)).toEqual([
      'p0',
    ]);

    // Every change made through either instance: the next pages on the other are exact.
    const [newestUnread] = (await list(a, u, 'filter=unread&limit=1')).body.notifications;
    await change(b, u, 'PATCH', `/notification/${newestUnread?.id}/read`, { read: true });
    expect(await totals(a)).toEqual({ all: 12, unread: 7, read: 5 });
    await change(a, u, 'DELETE', `/notification/${newestUnread?.id}`);
    expect(await totals(b)).toEqual({ all: 11, unread: 7, read: 4 });
    await b.notifications.createForUser(u.id, { type: 'info', title: 'fresh', content: 'now' });
    expect(await totals(a)).toEqual({ all: 12, unread: 8, read: 4 });
    await change(a, u, 'PATCH', '/notification/mark-all-read');
    expect(await totals(b)).toEqual({ all: 12, unread: 0, read: 12 });

    // An instance of an older release bumps the version without knowing the total's field (a rolling upgrade):
    // a row inserted behind the cache, then its bump as that release sends it. The stale total is not used.
    await vi.waitFor(async () => expect(await redis.hget(key, 'a')).toMatch(/:12$/));
    await a.ctx.database.db.execute(
      sql`insert into notification (user_id, type, title, content) values (${u.id}, 'info', 'behind', 'x')`,
    );
    await redis.hincrby(key, 'v', 1);
    await redis.hdel(key, 'c');
    expect((await list(b, u, 'limit=5&page=2')).body.pagination.totalCount).toBe(13);
  });

  it('serves the counts from the cache until a change, on either instance, and learns the totals from them', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    const past = Date.now() - 60_000;
    // 6 rows: 2 read; types info ×3, warning ×2, mention ×1.
    const types = ['info', 'warning', 'info', 'mention', 'warning', 'info'];
    await seed(
      a,
      u.id,
      types.map((type, i) => ({ type, read: i < 2, title: `k${i}`, createdAt: new Date(past + i) })),
    );
    const redis = a.ctx.store.redis?.data;
    if (!redis) throw new Error('the test environment has a shared store');
    const key = `${a.ctx.store.prefix}notif:unread:${u.id}`;
    const counts = async (app: App) => {
      const res = await app.inject({
        method: 'GET',
        url: '/notification/counts',
        headers: jsonHeaders(u.cookie),
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().counts as { byStatus: { all: number; read: number; unread: number }; byType: object };
    };
    const first = await counts(a);
    expect(first.byStatus).toEqual({ all: 6, read: 2, unread: 4 });
    expect(first.byType).toMatchObject({ info: 3, warning: 2, mention: 1, announcement: 0 });
    // Kept under the version read before the load, with the totals they give.
    const version = (await redis.hget(key, 'v')) ?? '0';
    await vi.waitFor(async () =>
      expect(await redis.hmget(key, 'k', 'a', 'c')).toEqual([
        `${version}:${JSON.stringify(first)}`,
        `${version}:6`,
        '4',
      ]),
    );
    // Served from there on the other instance (a planted figure proves it), then put back.
    const planted = { ...first, byStatus: { all: 60, read: 20, unread: 40 } };
    await redis.hset(key, 'k', `${version}:${JSON.stringify(planted)}`);
    expect((await counts(b)).byStatus).toEqual(planted.byStatus);
    await redis.hset(key, 'k', `${version}:${JSON.stringify(first)}`);
    // A later page's total comes from what the counts taught (no list page was read before).
    expect((await list(b, u, 'limit=2&page=2&filter=read')).body.pagination.totalCount).toBe(2);

    // Every change, made through either instance: the counts on the other are exact.
    const [newest] = (await list(a, u, 'limit=1')).body.notifications;
    await change(b, u, 'PATCH', `/notification/${newest?.id}/read`, { read: true });
    expect((await counts(a)).byStatus).toEqual({ all: 6, read: 3, unread: 3 });
    await change(a, u, 'DELETE', `/notification/${newest?.id}`);
    expect(await counts(b)).toMatchObject({ byStatus: { all: 5, read: 2, unread: 3 }, byType: { info: 2 } });
    await b.notifications.createForUser(u.id, { type: 'announcement', title: 'fresh', content: 'now' });
    expect(await counts(a)).toMatchObject({
      byStatus: { all: 6, read: 2, unread: 4 },
      byType: { announcement: 1 },
    });
    await change(a, u, 'PATCH', '/notification/mark-all-read');
    expect((await counts(b)).byStatus).toEqual({ all: 6, read: 6, unread: 0 });

    // An older release's bump (it does not know `k`) after a row inserted behind the cache: not served stale.
    await vi.waitFor(async () => expect(await redis.hget(key, 'k')).toMatch(/"all":6/));
    await a.ctx.database.db.execute(
      sql`insert into notification (user_id, type, title, content) values (${u.id}, 'system', 'behind', 'x')`,
    );
    await redis.hincrby(key, 'v', 1);
    await redis.hdel(key, 'c');
    expect(await counts(b)).toMatchObject({ byStatus: { all: 7, unread: 1 }, byType: { system: 1 } });
    await change(a, u, 'DELETE', '/notification/delete-all');
    expect((await counts(b)).byStatus).toEqual({ all: 0, read: 0, unread: 0 });
  });

  it('never keeps a page loaded before a change that committed while it loaded', async () => {
    const cache = createUnreadCache({ store: a.ctx.store, logger: a.log, countFromDb: async () => 0 });
    try {
      const user = `race-${Date.now()}`;
      let release: (json: string) => void = () => {};
      const slow = cache.page(user, 'all:20', () => new Promise<string>((r) => (release = r)));
      // The load has started (the version was read before it); a change commits and is invalidated meanwhile.
      await new Promise((r) => setTimeout(r, 50));
      await cache.invalidate([user]);
      release('{"before":true}');
      expect(await slow).toBe('{"before":true}');
      let loads = 0;
      const fresh = () => {
        loads++;
        return Promise.resolve('{"after":true}');
      };
      expect(await cache.page(user, 'all:20', fresh)).toBe('{"after":true}');
      expect(loads, 'the page written late under the old version was not served').toBe(1);
      // With no change in between, the next read is a hit.
      expect(await cache.page(user, 'all:20', fresh)).toBe('{"after":true}');
      expect(loads).toBe(1);
    } finally {
      cache.close();
    }
  });

  it('does not serve a surviving page once the version hash was lost (eviction, flush)', async () => {
    const cache = createUnreadCache({ store: a.ctx.store, logger: a.log, countFromDb: async () => 0 });
    try {
      const user = `evicted-${Date.now()}`;
      expect(await cache.page(user, 'all:20', async () => '"v1"')).toBe('"v1"');
      await cache.invalidate([user]);
      expect(await cache.page(user, 'all:20', async () => '"v2"')).toBe('"v2"');
      // The hash with the version goes (as under maxmemory eviction) while the page key survives.
      await a.ctx.store.del(`notif:unread:${user}`);
      expect(await a.ctx.store.get(`notif:page:${user}`)).toMatch(/\|"v2"$/);
      expect(await cache.page(user, 'all:20', async () => '"v3"')).toBe('"v3"');
      // A version that was lost restarts from the clock, far above the numbers a page could carry.
      await a.ctx.store.del(`notif:unread:${user}`);
      await cache.invalidate([user]);
      expect(await cache.page(user, 'all:20', async () => '"v4"')).toBe('"v4"');
    } finally {
      cache.close();
    }
  });

  it('answers from PostgreSQL while the store is down, and never a page from before the outage', async () => {
    const redis = await startRedisServer();
    const own = await createTestEnv({ CACHE_URL: redis.url });
    try {
      const app = await own.app();
      const u = await createVerifiedUser(app, own.smtp);
      const [id] = await seed(app, u.id, [{ title: 'one' }]);
      const before = await app.inject({
        method: 'GET',
        url: '/notification/list?limit=5',
        headers: jsonHeaders(u.cookie),
      });
      expect(before.json().notifications[0]).toMatchObject({ id, read: false });
      await redis.stop();
      // Sessions fall back to PostgreSQL; the change's cache bump fails and is retried in the background.
      const marked = await app.inject({
        method: 'PATCH',
        url: `/notification/${id}/read`,
        headers: jsonHeaders(u.cookie),
        payload: { read: true },
      });
      expect(marked.statusCode, marked.body).toBe(200);
      const during = await app.inject({
        method: 'GET',
        url: '/notification/list?limit=5',
        headers: jsonHeaders(u.cookie),
      });
      expect(during.statusCode, during.body).toBe(200);
      expect(during.json().notifications[0]).toMatchObject({ id, read: true });
    } finally {
      await own.close();
      await redis.close();
    }
  });
});

describe('list totals in the read cache, in-process and in the shared store', () => {
  const stores = [
    ['in-process', () => createStore({ prefix: 'totals:' })],
    [
      'shared store',
      () => createStore({ url: TEST_REDIS_URL, prefix: `totals:${randomBytes(6).toString('hex')}:` }),
    ],
  ] as const;

  /** A cache over `store` (once it is connected) whose database count is 3 and whose changes record `position`. */
  const cacheOver = async (store: ReturnType<typeof createStore>, position: string) => {
    // Commands on the shared store fail until it is connected (no offline queue for data): wait for it.
    await vi.waitFor(() => expect(store.isReady()).toBe(true));
    return createUnreadCache({
      store,
      logger: pino({ level: 'silent' }),
      countFromDb: async () => 3,
      writePosition: async () => position,
    });
  };

  for (const [name, make] of stores) {
    it(`${name}: keeps what a page counted under its version, derives the read total, forgets on a change`, async () => {
      const store = make();
      const position = '0/16B3748';
      const cache = await cacheOver(store, position);
      try {
        const seen: Array<[string, number | null]> = [];
        const page = (user: string, filter: TotalFilter, counted: number) =>
          cache.pageWithTotal(user, filter, async (at, total) => {
            seen.push([filter, total]);
            return { value: `${filter}@${at ?? '-'}`, total: total ?? counted };
          });
        const settled = () => new Promise((r) => setTimeout(r, 20));

        // Nothing held: every filter counts; all, then unread, are learned (read then follows: 10 − 4).
        expect(await page('u1', 'read', 6)).toBe('read@-');
        expect(await page('u1', 'all', 10)).toBe('all@-');
        await settled();
        expect(await page('u1', 'all', -1)).toBe('all@-');
        expect(await page('u1', 'unread', 4)).toBe('unread@-');
        await settled();
        expect(await page('u1', 'read', -1)).toBe('read@-');
        expect(await page('u1', 'unread', -1)).toBe('unread@-');
        expect(seen).toEqual([
          ['read', null],
          ['all', null],
          ['all', 10],
          ['unread', null],
          ['read', 6],
          ['unread', 4],
        ]);

        // A read page learns the other figure from the one held: unread 3 held, read 5 counted → all 8.
        await cache.invalidate(['u2']);
        expect(await cache.get('u2')).toBe(3);
        seen.length = 0;
        expect(await page('u2', 'read', 5)).toBe(`read@${position}`);
        await settled();
        expect(await page('u2', 'all', -1)).toBe(`all@${position}`);
        expect(seen).toEqual([
          ['read', null],
          ['all', 8],
        ]);
        // The unread count read after the change kept the change's position (the read-your-writes bound).
        expect(await cache.position('u2')).toBe(position);

        // The counts are kept whole, and teach the totals: u4's later pages need no count.
        const c4 = {
          byStatus: { all: 9, read: 7, unread: 2 },
          byType: { ...Object.fromEntries(NOTIFICATION_TYPES.map((t) => [t, 0])), info: 9 },
        } as Counts;
        let countLoads = 0;
        const countsOf = (user: string) =>
          cache.counts(user, async () => {
            countLoads++;
            return c4;
          });
        expect(await countsOf('u4')).toEqual(c4);
        await settled();
        expect(await countsOf('u4')).toEqual(c4);
        expect(countLoads).toBe(1);
        seen.length = 0;
        await page('u4', 'read', -1);
        expect(seen).toEqual([['read', 7]]);
        await cache.invalidate(['u4']);
        expect(await countsOf('u4')).toEqual(c4);
        expect(countLoads).toBe(2);

        // A change forgets both; a total counted by a load that began before the change is not kept.
        let release: (v: { value: string; total: number }) => void = () => {};
        const slow = cache.pageWithTotal(
          'u3',
          'all',
          () => new Promise<{ value: string; total: number }>((r) => (release = r)),
        );
        await settled();
        await cache.invalidate(['u1', 'u3']);
        release({ value: 'late', total: 10 });
        expect(await slow).toBe('late');
        await settled();
        seen.length = 0;
        await page('u1', 'all', 11);
        await page('u1', 'unread', 5);
        await page('u3', 'all', 12);
        await settled();
        await page('u3', 'all', -1);
        expect(seen).toEqual([
          ['all', null],
          ['unread', null],
          ['all', null],
          ['all', 12],
        ]);
      } finally {
        cache.close();
        await store.close();
      }
    });
  }

  it('a key whose change position is unknown keeps its short life when a read stores into it', async () => {
    const store = createStore({ url: TEST_REDIS_URL, prefix: `totals:${randomBytes(6).toString('hex')}:` });
    // The primary's position could not be read: the bump records PRIMARY_ONLY and a life of 65 s.
    const cache = await cacheOver(store, PRIMARY_ONLY);
    const redis = store.redis?.data;
    if (!redis) throw new Error('a shared store was asked for');
    try {
      const key = `${store.prefix}notif:unread:u6`;
      await cache.invalidate(['u6']);
      const short = await redis.pttl(key);
      expect(short).toBeGreaterThan(0);
      expect(short).toBeLessThanOrEqual(65_000);
      // The reads that store into the hash: the unread count, a page's total, the counts.
      expect(await cache.get('u6')).toBe(3);
      await cache.pageWithTotal('u6', 'all', async () => ({ value: 'page', total: 5 }));
      await cache.counts('u6', async () => ({
        byStatus: { all: 5, read: 2, unread: 3 },
        byType: Object.fromEntries(
          NOTIFICATION_TYPES.map((t) => [t, t === 'info' ? 5 : 0]),
        ) as Counts['byType'],
      }));
      await vi.waitFor(async () => expect(await redis.hget(key, 'k')).not.toBeNull());
      expect(await redis.hget(key, 'c')).toBe('3');
      expect(await redis.pttl(key)).toBeLessThanOrEqual(65_000);
      // A key such a write creates gets the ordinary life.
      await cache.counts('u7', async () => ({
        byStatus: { all: 0, read: 0, unread: 0 },
        byType: Object.fromEntries(NOTIFICATION_TYPES.map((t) => [t, 0])) as Counts['byType'],
      }));
      await vi.waitFor(async () =>
        expect(await redis.pttl(`${store.prefix}notif:unread:u7`)).toBeGreaterThan(65_000),
      );
    } finally {
      cache.close();
      await store.close();
    }
  });

  it('in-process: keeps a bounded number of users, and a dropped user is never served stale', async () => {
    const store = createStore({ prefix: 'bound:' });
    let position = '0/0000A0';
    const counted: string[] = [];
    const cache = createUnreadCache({
      store,
      logger: pino({ level: 'silent' }),
      countFromDb: async (userId) => {
        counted.push(userId);
        return 3;
      },
      writePosition: async () => position,
      localEntries: 3,
    });
    try {
      // Five users read their count: only the three written last are kept.
      for (const u of ['u1', 'u2', 'u3', 'u4', 'u5']) await cache.get(u);
      counted.length = 0;
      for (const u of ['u5', 'u4', 'u3']) await cache.get(u);
      expect(counted).toEqual([]);
      await cache.get('u1');
      expect(counted).toEqual(['u1']);

      // A change's position outlives its user's entry: u6 changed, then was dropped; its reads (and those of any
      // user without an entry) still wait for that position, also once a read has given u6 an entry again.
      expect(await cache.position('u1')).toBeNull();
      position = '0/0000B0';
      await cache.invalidate(['u6']);
      position = '0/0000C0';
      await cache.invalidate(['u7', 'u8', 'u9']);
      expect(await cache.position('u6')).toBe('0/0000B0');
      expect(await cache.get('u6')).toBe(3);
      expect(await cache.position('u6')).toBe('0/0000B0');
      // Giving u6 its entry back dropped u7, changed at C0: the newest dropped position is now C0.
      expect(await cache.position('u10')).toBe('0/0000C0');

      // A load that began before its user's change and a drop must not store: with versions counted per user from
      // 0, the dropped user would be back at the version the load began under and get its stale total.
      let release: (v: { value: string; total: number }) => void = () => {};
      const slow = cache.pageWithTotal(
        'u20',
        'all',
        () => new Promise<{ value: string; total: number }>((r) => (release = r)),
      );
      await cache.invalidate(['u20']);
      for (const u of ['u21', 'u22', 'u23']) await cache.get(u);
      release({ value: 'late', total: 10 });
      expect(await slow).toBe('late');
      const totals: Array<number | null> = [];
      await cache.pageWithTotal('u20', 'all', async (_at, known) => {
        totals.push(known);
        return { value: 'now', total: 11 };
      });
      expect(totals).toEqual([null]);

      // The same for a first page: one loaded before a change and a drop is not kept.
      let releasePage: (json: string) => void = () => {};
      const slowPage = cache.page('u30', 'sig', () => new Promise<string>((r) => (releasePage = r)));
      await cache.invalidate(['u30']);
      for (const u of ['u31', 'u32', 'u33']) await cache.get(u);
      releasePage('stale');
      expect(await slowPage).toBe('stale');
      expect(await cache.page('u30', 'sig', async () => 'fresh')).toBe('fresh');
      expect(await cache.page('u30', 'sig', async () => 'not read')).toBe('fresh');
    } finally {
      cache.close();
      await store.close();
    }
  });

  it('derives a filter total from what is held, and what a counted total teaches', () => {
    const none = { all: null, unread: null };
    expect(totalOf('all', { all: 7, unread: 2 })).toBe(7);
    expect(totalOf('unread', { all: 7, unread: 2 })).toBe(2);
    expect(totalOf('read', { all: 7, unread: 2 })).toBe(5);
    expect(totalOf('read', { all: 7, unread: null })).toBeNull();
    expect(totalOf('all', none)).toBeNull();
    expect(learnedTotals('all', 7, none)).toEqual({ all: 7, unread: null });
    expect(learnedTotals('unread', 2, none)).toEqual({ all: null, unread: 2 });
    expect(learnedTotals('read', 5, none)).toEqual(none);
    expect(learnedTotals('read', 5, { all: 7, unread: null })).toEqual({ all: null, unread: 2 });
    expect(learnedTotals('read', 5, { all: null, unread: 2 })).toEqual({ all: 7, unread: null });
  });
});
