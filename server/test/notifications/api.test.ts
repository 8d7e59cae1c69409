import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { NOTIFICATION_TYPES } from '../../src/notifications/schemas.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { dbUnread, seed } from '../helpers/seed.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

describe('notification API', () => {
  let env: TestEnv;
  let app: App;
  let alice: TestUser;
  let bob: TestUser;

  const get = (url: string, u?: TestUser) =>
    app.inject({ method: 'GET', url, headers: jsonHeaders(u?.cookie) });
  const send = (method: 'PATCH' | 'POST' | 'DELETE', url: string, u?: TestUser, payload?: unknown) =>
    app.inject({
      method,
      url,
      headers:
        payload === undefined
          ? { origin: 'http://localhost:3000', ...(u ? { cookie: u.cookie } : {}) }
          : jsonHeaders(u?.cookie),
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });

  beforeAll(async () => {
    env = await createTestEnv({ ACTION_ALLOWED_DOMAINS: 'docs.example.org' });
    app = await env.app();
    [alice, bob] = await Promise.all([createVerifiedUser(app, env.smtp), createVerifiedUser(app, env.smtp)]);
  });
  afterAll(() => env.close());

  it('requires a session on every route (401 with the contract body)', async () => {
    const routes: Array<[string, string]> = [
      ['GET', '/notification/list'],
      ['GET', '/notification/counts'],
      ['GET', '/notification/unread-count'],
      ['PATCH', '/notification/00000000-0000-0000-0000-000000000000/read'],
      ['PATCH', '/notification/mark-all-read'],
      ['DELETE', '/notification/00000000-0000-0000-0000-000000000000'],
      ['DELETE', '/notification/delete-all'],
      ['GET', '/notification/preferences'],
      ['PATCH', '/notification/preferences'],
      ['POST', '/notification/heartbeat'],
      ['GET', '/notification/stream'],
    ];
    for (const [method, url] of routes) {
      const res = await app.inject({
        method: method as 'GET',
        url,
        headers: { cookie: 'better-auth.session_token=bogus' },
      });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    }
  });

  it('lists with pagination math, newest first with ties by id', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const same = new Date(Date.UTC(2031, 0, 1));
    await seed(app, u.id, [
      ...Array.from({ length: 23 }, (_, i) => ({
        title: `n${i}`,
        createdAt: new Date(Date.UTC(2030, 0, 1) + i * 1000),
      })),
      { title: 'tie-a', createdAt: same },
      { title: 'tie-b', createdAt: same },
    ]);
    const p1 = (await get('/notification/list?limit=10', u)).json();
    expect(p1.pagination).toEqual({
      page: 1,
      limit: 10,
      totalCount: 25,
      totalPages: 3,
      hasNextPage: true,
      hasPreviousPage: false,
    });
    expect(p1.notifications).toHaveLength(10);
    // ties (same createdAt) come first, ordered by id descending
    const [t1, t2] = p1.notifications;
    expect(t1.createdAt).toBe(same.toISOString());
    expect(t2.createdAt).toBe(same.toISOString());
    expect(t1.id > t2.id).toBe(true);
    expect(p1.notifications[2].title).toBe('n22');
    const p3 = (await get('/notification/list?limit=10&page=3', u)).json();
    expect(p3.notifications.map((n: { title: string }) => n.title)).toEqual(['n4', 'n3', 'n2', 'n1', 'n0']);
    expect(p3.pagination).toMatchObject({ page: 3, hasNextPage: false, hasPreviousPage: true });
    const beyond = (await get('/notification/list?limit=10&page=9', u)).json();
    expect(beyond.notifications).toEqual([]);
    expect(beyond.pagination.totalCount).toBe(25);
    // No notifications at all: zero pages, nothing before or after
    const none = await createVerifiedUser(app, env.smtp);
    expect((await get('/notification/list', none)).json()).toEqual({
      notifications: [],
      pagination: {
        page: 1,
        limit: 20,
        totalCount: 0,
        totalPages: 0,
        hasNextPage: false,
        hasPreviousPage: false,
      },
    });
    const def = (await get('/notification/list', u)).json();
    expect(def.pagination).toMatchObject({ page: 1, limit: 20, totalPages: 2 });
    // Shape of one notification
    expect(Object.keys(def.notifications[0]).sort()).toEqual(
      ['content', 'createdAt', 'id', 'metadata', 'read', 'title', 'type', 'updatedAt', 'userId'].sort(),
    );
  });

  it('filters by read state and type, and searches literally', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    await seed(app, u.id, [
      { title: '100% done', type: 'success', read: true },
      { title: '100 percent', content: 'plain', type: 'success' },
      { title: 'snake_case name', type: 'info' },
      { title: 'snakeXcase name', type: 'info', read: true },
      { title: 'path', content: 'C:\\temp\\x', type: 'warning' },
      { title: 'Other', content: 'mentions DONE in content', type: 'mention' },
    ]);
    const titles = async (q: string) =>
      ((await get(`/notification/list?${q}`, u)).json().notifications as Array<{ title: string }>)
        .map((n) => n.title)
        .sort();
    expect(await titles('filter=read')).toEqual(['100% done', 'snakeXcase name']);
    expect((await titles('filter=unread')).length).toBe(4);
    expect(await titles('type=success')).toEqual(['100 percent', '100% done']);
    expect(await titles('type=info&filter=unread')).toEqual(['snake_case name']);
    expect(await titles(`search=${encodeURIComponent('100%')}`)).toEqual(['100% done']);
    expect(await titles(`search=${encodeURIComponent('e_c')}`)).toEqual(['snake_case name']);
    expect(await titles(`search=${encodeURIComponent('\\temp')}`)).toEqual(['path']);
    expect(await titles('search=done')).toEqual(['100% done', 'Other']);
    const res = await get(`/notification/list?search=${encodeURIComponent('%')}&limit=1`, u);
    expect(res.json().pagination.totalCount).toBe(1);
  });

  it('rejects invalid list queries with 400', async () => {
    for (const q of [
      'page=0',
      'page=abc',
      'limit=0',
      'limit=101',
      'filter=new',
      'type=spam',
      `search=${'x'.repeat(201)}`,
      // PostgreSQL text cannot hold NUL: refused, not a 500
      'search=%00',
      'search=a%00b',
    ]) {
      const res = await get(`/notification/list?${q}`, alice);
      expect(res.statusCode, q).toBe(400);
      expect(res.json().code).toBe('VALIDATION_ERROR');
    }
  });

  it('counts by status and every type in one aggregate, zeros included', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const empty = (await get('/notification/counts', u)).json();
    expect(empty.counts.byStatus).toEqual({ all: 0, read: 0, unread: 0 });
    expect(Object.keys(empty.counts.byType).sort()).toEqual([...NOTIFICATION_TYPES].sort());
    await seed(app, u.id, [
      { type: 'mention' },
      { type: 'mention', read: true },
      { type: 'warning' },
      { type: 'system', read: true },
    ]);
    const { counts } = (await get('/notification/counts', u)).json();
    expect(counts.byStatus).toEqual({ all: 4, read: 2, unread: 2 });
    expect(counts.byType).toMatchObject({ mention: 2, warning: 1, system: 1, info: 0, announcement: 0 });
  });

  it('toggles read state, 404 for missing, malformed and other users ids', async () => {
    const [id] = await seed(app, alice.id, [{ title: 'toggle me' }]);
    const before = (await get('/notification/unread-count', alice)).json().unreadCount;
    const res = await send('PATCH', `/notification/${id}/read`, alice, { read: true });
    expect(res.statusCode).toBe(200);
    expect(res.json().notification).toMatchObject({ id, read: true, userId: alice.id });
    expect((await get('/notification/unread-count', alice)).json().unreadCount).toBe(before - 1);
    const back = await send('PATCH', `/notification/${id}/read`, alice, { read: false });
    expect(back.json().notification.read).toBe(false);
    expect((await get('/notification/unread-count', alice)).json().unreadCount).toBe(before);

    expect((await send('PATCH', `/notification/${id}/read`, bob, { read: true })).statusCode).toBe(404);
    expect(
      (await send('PATCH', '/notification/00000000-0000-0000-0000-000000000000/read', alice, { read: true }))
        .statusCode,
    ).toBe(404);
    expect((await send('PATCH', '/notification/not-a-uuid/read', alice, { read: true })).json().code).toBe(
      'NOT_FOUND',
    );
    // Malformed ids of any length are simply not found (up to the router's parameter length limit)
    for (const malformed of ['x'.repeat(65), 'x'.repeat(100), `${id}0`]) {
      const r = await send('PATCH', `/notification/${malformed}/read`, alice, { read: true });
      expect(r.statusCode, malformed).toBe(404);
      expect(r.json().code).toBe('NOT_FOUND');
      expect((await send('DELETE', `/notification/${malformed}`, alice)).statusCode, malformed).toBe(404);
    }
    for (const body of [{}, { read: 'yes' }, { read: true, extra: 1 }]) {
      const bad = await send('PATCH', `/notification/${id}/read`, alice, body);
      expect(bad.statusCode, JSON.stringify(body)).toBe(400);
    }
    // Bob's attempt changed nothing
    const still = (await get('/notification/list', alice))
      .json()
      .notifications.find((n: { id: string }) => n.id === id);
    expect(still.read).toBe(false);
  });

  it('marks all read, deletes one and all; others cannot delete', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const ids = await seed(app, u.id, [{}, {}, { read: true }, {}]);
    // An id in upper case is the same notification; the response names it canonically (as the list does)
    const [upper] = await seed(app, u.id, [{ title: 'upper' }]);
    const delUpper = await send('DELETE', `/notification/${upper?.toUpperCase()}`, u);
    expect(delUpper.statusCode).toBe(200);
    expect(delUpper.json()).toEqual({ notificationId: upper });
    expect((await get('/notification/unread-count', u)).json().unreadCount).toBe(3);
    const mar = await send('PATCH', '/notification/mark-all-read', u);
    expect(mar.json()).toEqual({ updatedCount: 3 });
    expect((await get('/notification/unread-count', u)).json().unreadCount).toBe(0);
    expect((await send('PATCH', '/notification/mark-all-read', u)).json()).toEqual({ updatedCount: 0 });

    expect((await send('DELETE', `/notification/${ids[0]}`, bob)).statusCode).toBe(404);
    const del = await send('DELETE', `/notification/${ids[0]}`, u);
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ notificationId: ids[0] });
    expect((await send('DELETE', `/notification/${ids[0]}`, u)).statusCode).toBe(404);
    expect((await send('DELETE', '/notification/zzz', u)).statusCode).toBe(404);

    await seed(app, u.id, [{}]);
    const all = await send('DELETE', '/notification/delete-all', u);
    expect(all.json()).toEqual({ deletedCount: 4 });
    expect((await get('/notification/unread-count', u)).json().unreadCount).toBe(0);
    expect((await get('/notification/counts', u)).json().counts.byStatus.all).toBe(0);
  });

  it('creates preferences with defaults, patches and validates them', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    // Concurrent first reads must not race on the insert.
    const first = await Promise.all(Array.from({ length: 5 }, () => get('/notification/preferences', u)));
    for (const r of first) expect(r.statusCode).toBe(200);
    expect(first[0]?.json().preferences).toMatchObject({
      emailEnabled: true,
      pushEnabled: false,
      emailTypes: ['friend_request', 'mention', 'announcement', 'warning'],
      pushTypes: ['message', 'friend_request', 'mention'],
    });
    const patched = await send('PATCH', '/notification/preferences', u, {
      emailEnabled: false,
      emailTypes: ['system', 'system', 'info'],
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json().preferences).toMatchObject({
      emailEnabled: false,
      pushEnabled: false,
      emailTypes: ['system', 'info'],
      pushTypes: ['message', 'friend_request', 'mention'],
    });
    const reset = await send('PATCH', '/notification/preferences', u, {
      emailTypes: null,
      pushEnabled: true,
    });
    expect(reset.json().preferences).toMatchObject({
      emailEnabled: false,
      pushEnabled: true,
      emailTypes: ['friend_request', 'mention', 'announcement', 'warning'],
    });
    for (const body of [
      { emailTypes: ['spam'] },
      { pushTypes: 'mention' },
      { emailEnabled: 'yes' },
      { unknown: true },
      { emailTypes: [1] },
      { emailEnabled: null },
      { pushEnabled: 1 },
      { pushTypes: ['mention', 'spam'] },
    ]) {
      const bad = await send('PATCH', '/notification/preferences', u, body);
      expect(bad.statusCode, JSON.stringify(body)).toBe(400);
      expect(bad.json().code).toBe('VALIDATION_ERROR');
    }
    // An empty patch changes nothing and answers the stored preferences
    const empty = await send('PATCH', '/notification/preferences', u, {});
    expect(empty.statusCode).toBe(200);
    expect(empty.json().preferences).toEqual(reset.json().preferences);
    // A patch on a user who never read preferences creates the row.
    const v = await createVerifiedUser(app, env.smtp);
    const created = await send('PATCH', '/notification/preferences', v, { pushEnabled: true });
    expect(created.json().preferences).toMatchObject({ pushEnabled: true, emailEnabled: true });
  });

  it('answers heartbeat with an epoch-ms timestamp', async () => {
    const before = Date.now();
    const res = await send('POST', '/notification/heartbeat', alice);
    expect(res.statusCode).toBe(200);
    expect(res.json().timestamp).toBeGreaterThanOrEqual(before);
  });

  it('validates notifications created through the service, including action URLs', async () => {
    const create = (metadata: Record<string, unknown>) =>
      app.notifications.createForUser(alice.id, { type: 'info', title: 't', content: 'c', metadata });
    const link = (url: string) => ({ actions: [{ actionId: 'a', type: 'link', label: 'Open', url }] });
    for (const url of [
      '/inbox',
      '/a/b?c=1#d',
      'http://localhost:3000/x',
      'HTTP://LOCALHOST:3000/x',
      'https://docs.example.org/page',
      'https://docs.example.org:443/page',
    ]) {
      await expect(create(link(url))).resolves.toMatchObject({ userId: alice.id });
    }
    for (const url of [
      'javascript:alert(1)',
      '//evil.example/x',
      '/\\evil.example',
      'https://evil.example/x',
      'ftp://localhost:3000/x',
      'data:text/html,hi',
      'https://user:pw@localhost:3000/',
      'inbox',
      // the port is part of the host: another port is another application
      'http://localhost:9999/x',
      'http://localhost/x',
      'https://docs.example.org:8443/page',
      'JAVASCRIPT:alert(1)',
      'http://localhost:3000@evil.example/',
      'https://docs.example.org./page',
      ' /inbox',
    ]) {
      await expect(create(link(url)), url).rejects.toMatchObject({
        statusCode: 400,
        code: 'ACTION_URL_NOT_ALLOWED',
      });
    }
    await expect(create({ data: { blob: 'x'.repeat(17 * 1024) } })).rejects.toMatchObject({
      statusCode: 400,
    });
    await expect(create({ priority: 'extreme' })).rejects.toMatchObject({ statusCode: 400 });
    // NUL cannot be stored (jsonb), and nesting too deep to serialise is refused, both as 400 not 500
    await expect(create({ data: { x: 'a\u0000b' } })).rejects.toMatchObject({ statusCode: 400 });
    await expect(create({ data: { 'k\u0000': 1 } })).rejects.toMatchObject({ statusCode: 400 });
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    await expect(create({ data: { deep } })).rejects.toMatchObject({ statusCode: 400 });
    await expect(
      app.notifications.createForUser(alice.id, { type: 'info', title: 'a\u0000', content: 'c' }),
    ).rejects.toMatchObject({ statusCode: 400 });
    await expect(create({ data: { literal: '\\u0000 is fine as text' } })).resolves.toMatchObject({
      userId: alice.id,
    });
    await expect(create({ surprise: 1 })).rejects.toMatchObject({ statusCode: 400 });
    await expect(
      create({
        actions: Array.from({ length: 6 }, (_, i) => ({
          actionId: `a${i}`,
          type: 'link',
          label: 'x',
          url: '/',
        })),
      }),
    ).rejects.toMatchObject({ statusCode: 400 });
  });

  it('marks authenticated responses no-store and answers If-None-Match on the counts with 304', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const list = await get('/notification/list', u);
    expect(list.headers['cache-control']).toBe('no-store');
    for (const path of ['/notification/unread-count', '/notification/counts']) {
      const first = await get(path, u);
      expect(first.statusCode).toBe(200);
      expect(first.headers['cache-control']).toBe('no-store');
      const etag = first.headers.etag as string;
      expect(etag).toMatch(/^W\/"/);
      const same = await app.inject({
        method: 'GET',
        url: path,
        headers: { cookie: u.cookie, 'if-none-match': etag },
      });
      expect(same.statusCode, path).toBe(304);
      expect(same.body).toBe('');
      const other = await app.inject({
        method: 'GET',
        url: path,
        headers: { cookie: u.cookie, 'if-none-match': 'W/"something-else"' },
      });
      expect(other.statusCode).toBe(200);
    }
    // A change makes the old tag stale: the count is sent again.
    const before = (await get('/notification/unread-count', u)).headers.etag as string;
    await app.notifications.createForUser(u.id, {
      type: 'info',
      title: 'etag',
      content: 'changes the count',
    });
    const after = await app.inject({
      method: 'GET',
      url: '/notification/unread-count',
      headers: { cookie: u.cookie, 'if-none-match': before },
    });
    expect(after.statusCode).toBe(200);
    expect(after.json().unreadCount).toBe(1);
    // Unauthenticated answers are not marked (nothing private in them) and never 304.
    expect((await get('/notification/unread-count')).statusCode).toBe(401);
  });

  it('keeps the cached unread count equal to the database under concurrent changes', async () => {
    const u = await createVerifiedUser(app, env.smtp);
    const ids = await seed(
      app,
      u.id,
      Array.from({ length: 20 }, () => ({})),
    );
    const ops: Array<Promise<unknown>> = [];
    for (let round = 0; round < 4; round++) {
      for (const [i, id] of ids.entries()) {
        ops.push(send('PATCH', `/notification/${id}/read`, u, { read: (i + round) % 2 === 0 }));
        ops.push(get('/notification/unread-count', u));
      }
    }
    await Promise.all(ops);
    const cached = (await get('/notification/unread-count', u)).json().unreadCount;
    expect(cached).toBe(await dbUnread(app, u.id));
    // And a change that returned is visible immediately.
    await send('PATCH', '/notification/mark-all-read', u);
    expect((await get('/notification/unread-count', u)).json().unreadCount).toBe(0);
  });

  it('documents every notification route in the OpenAPI document', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    for (const p of [
      '/notification/list',
      '/notification/counts',
      '/notification/unread-count',
      '/notification/{id}/read',
      '/notification/mark-all-read',
      '/notification/{id}',
      '/notification/delete-all',
      '/notification/preferences',
      '/notification/heartbeat',
      '/notification/stream',
      '/admin/notifications/send',
    ]) {
      expect(doc.paths[p], p).toBeDefined();
    }
  });
});
