import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { user as userTable } from '../../src/infra/schema/index.js';
import { NOTIFICATION_EVENTS_TOPIC, type NotificationBusMessage } from '../../src/notifications/events.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { openStream } from '../helpers/sse-client.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const body = (target: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  target,
  notification: { type: 'announcement', title: 'Hello all', content: 'Broadcast body', ...extra },
});

describe('admin broadcast', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let users: TestUser[];

  const post = (payload: unknown, cookie?: string, headers: Record<string, string> = {}) =>
    app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: { ...jsonHeaders(cookie), ...headers },
      payload: payload as Record<string, unknown>,
    });
  const countFor = async (title: string) =>
    Number(
      rowsOf<{ n: number }>(
        await app.ctx.database.db.execute(
          sql`select count(*)::int as n from notification where title = ${title}`,
        ),
      )[0]?.n,
    );

  beforeAll(async () => {
    env = await createTestEnv({ BROADCAST_BATCH_SIZE: '3', PRESENCE_DEBOUNCE_MS: '0' });
    app = await env.app();
    admin = await createAdmin(app, env.smtp);
    users = [];
    for (let i = 0; i < 6; i++) users.push(await createVerifiedUser(app, env.smtp));
  });
  afterAll(() => env.close());

  it('requires an admin session', async () => {
    expect((await post(body({ scope: 'all' }))).statusCode).toBe(401);
    const res = await post(body({ scope: 'all' }), users[0]?.cookie);
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('FORBIDDEN');
  });

  it('rejects invalid bodies with 400', async () => {
    const cases: unknown[] = [
      {},
      body({ scope: 'everyone' }),
      body({ scope: 'users', identifiers: [] }),
      body({ scope: 'users', identifiers: Array.from({ length: 10_001 }, (_, i) => `u${i}`) }),
      body({ scope: 'user' }),
      body({ scope: 'all', extra: 1 }),
      body({ scope: 'all' }, { type: 'spam' }),
      body({ scope: 'all' }, { title: '' }),
      body({ scope: 'all' }, { content: 'x'.repeat(5001) }),
      body({ scope: 'all' }, { deliveryOptions: { strategies: ['sms'] } }),
      body({ scope: 'all' }, { unknown: true }),
      { ...body({ scope: 'all' }), more: 1 },
      // NUL cannot be stored in PostgreSQL text/jsonb: 400, not 500
      body({ scope: 'all' }, { title: 'a\u0000b' }),
      body({ scope: 'all' }, { content: 'a\u0000b' }),
      body({ scope: 'all' }, { metadata: { data: { x: '\u0000' } } }),
      body({ scope: 'users', identifiers: ['x\u0000y'] }),
      body({ scope: 'user', identifier: '   ' }),
      body({ scope: 'all' }, { deliveryOptions: { strategies: [] } }),
      body(
        { scope: 'all' },
        { metadata: { actions: [{ actionId: '', type: 'link', label: 'x', url: '/' }] } },
      ),
      body(
        { scope: 'all' },
        { metadata: { actions: [{ actionId: 'a', type: 'link', label: 'x'.repeat(101), url: '/' }] } },
      ),
      body(
        { scope: 'all' },
        { metadata: { actions: [{ actionId: 'a', type: 'link', label: 'x', url: '/', variant: 'huge' }] } },
      ),
      body({ scope: 'all' }, { metadata: { expiresAt: 'tomorrow' } }),
    ];
    for (const c of cases) {
      const res = await post(c, admin.cookie);
      expect(res.statusCode, JSON.stringify(c).slice(0, 120)).toBe(400);
    }
    for (const url of ['javascript:alert(1)', '//evil.example/x', 'https://evil.example/']) {
      const res = await post(
        body({ scope: 'all' }, { metadata: { actions: [{ actionId: 'a', type: 'link', label: 'x', url }] } }),
        admin.cookie,
      );
      expect(res.statusCode, url).toBe(400);
      expect(res.json().code).toBe('ACTION_URL_NOT_ALLOWED');
    }
  });

  it('refuses metadata nested too deep to serialise with 400, not 500', async () => {
    const depth = 200_000;
    const raw = `{"target":{"scope":"all"},"notification":{"type":"info","title":"t","content":"c","metadata":{"data":{"x":${'['.repeat(depth)}${']'.repeat(depth)}}}}}`;
    const res = await app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: jsonHeaders(admin.cookie),
      payload: raw,
    });
    expect(res.statusCode).toBe(400);
    // Refused at parse (too deeply nested, http/nul-guard.ts): never reaches validation or serialisation.
    expect(res.json().code).toBe('INVALID_JSON');
  });

  // A lone UTF-16 surrogate (`\ud800` in the JSON) is valid JSON but not Unicode: PostgreSQL's jsonb parser refuses
  // the `\ud800` escape JSON.stringify writes for it ("unsupported Unicode escape sequence"), which used to answer
  // 500. Stored as U+FFFD instead, as text columns (title, content) always stored it (docs/api.md#errors).
  const metadataOf = async (title: string) =>
    rowsOf<{ metadata: Record<string, unknown> }>(
      await app.ctx.database.db.execute(sql`select metadata from notification where title = ${title}`),
    ).map((r) => r.metadata);

  it('stores lone surrogates in any metadata string or key as U+FFFD: 200, not a 500 from the jsonb insert', async () => {
    const action = (over: Record<string, unknown>) => ({
      actions: [{ actionId: 'open', type: 'link', label: 'Open', url: '/x', ...over }],
    });
    const cases: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
      ['actionId', action({ actionId: '\ud800' }), action({ actionId: '\ufffd' })],
      ['label', action({ label: 'a\udfff' }), action({ label: 'a\ufffd' })],
      ['actionGroupVariant', { actionGroupVariant: '\ud800x' }, { actionGroupVariant: '\ufffdx' }],
      [
        'data value',
        { data: { v: 'x\udfffy', deep: [{ w: '\ud800' }] } },
        { data: { v: 'x\ufffdy', deep: [{ w: '\ufffd' }] } },
      ],
      [
        'data key',
        { data: { '\ud800': 1, k: { '\udfff': 2 } } },
        { data: { '\ufffd': 1, k: { '\ufffd': 2 } } },
      ],
      // Left alone: a proper pair (an emoji), reversed halves (two lone ones), and a backslash followed by "ud800".
      [
        'pair',
        { data: { e: '\ud83d\ude00', r: '\ude00\ud83d', b: '\\ud800' } },
        { data: { e: '\ud83d\ude00', r: '\ufffd\ufffd', b: '\\ud800' } },
      ],
    ];
    for (const [name, metadata, stored] of cases) {
      const title = `lone surrogate ${name}`;
      const res = await post(
        body({ scope: 'user', identifier: users[5]?.id }, { title, metadata }),
        admin.cookie,
      );
      expect(res.statusCode, `${name}: ${res.body}`).toBe(200);
      expect(res.json()).toMatchObject({ createdCount: 1, failures: [] });
      expect(await metadataOf(title), name).toEqual([stored]);
    }
    // Title and content (text columns) store them as U+FFFD too.
    const res = await post(
      body({ scope: 'user', identifier: users[5]?.id }, { title: 'lone \ud800', content: 'c\udfff' }),
      admin.cookie,
    );
    expect(res.statusCode).toBe(200);
    const [row] = rowsOf<{ content: string }>(
      await app.ctx.database.db.execute(sql`select content from notification where title = ${'lone \ufffd'}`),
    );
    expect(row?.content).toBe('c\ufffd');
  });

  it('takes lone surrogates in identifiers with an Idempotency-Key: failures stored with U+FFFD, 200 not 500', async () => {
    const payload = body(
      { scope: 'users', identifiers: [users[5]?.id, 'ghost\ud800@example.test'] },
      { title: 'surrogate ids' },
    );
    const key = { 'idempotency-key': 'surrogate-ids' };
    const first = await post(payload, admin.cookie, key);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({
      targetCount: 1,
      createdCount: 1,
      failures: [{ reason: 'NOT_FOUND' }],
    });
    // The retry is answered from the stored (jsonb) response.
    const again = await post(payload, admin.cookie, key);
    expect(again.statusCode).toBe(200);
    expect(again.json().failures).toEqual([{ identifier: 'ghost\ufffd@example.test', reason: 'NOT_FOUND' }]);
    expect(await countFor('surrogate ids')).toBe(1);
  });

  it('queues an asynchronous send whose body has lone surrogates: 202, run to done, stored with U+FFFD', async () => {
    const payload = body(
      { scope: 'users', identifiers: [users[5]?.id, 'ghost\udfff'] },
      { title: 'surrogate async', metadata: { actionGroupVariant: '\ud800', data: { '\ud800': 'x\udfff' } } },
    );
    const res = await post(payload, admin.cookie, { prefer: 'respond-async' });
    expect(res.statusCode, res.body).toBe(202);
    const { sendId } = res.json() as { sendId: string };
    let view: { status: string; failures: unknown[] } = { status: '', failures: [] };
    await expect
      .poll(
        async () => {
          view = (
            await app.inject({
              url: `/admin/notifications/sends/${sendId}`,
              headers: { cookie: admin.cookie },
            })
          ).json();
          return view.status;
        },
        { timeout: 10_000 },
      )
      .toBe('done');
    expect(view.failures).toEqual([{ identifier: 'ghost\ufffd', reason: 'NOT_FOUND' }]);
    expect(await metadataOf('surrogate async')).toEqual([
      { actionGroupVariant: '\ufffd', data: { '\ufffd': 'x\ufffd' } },
    ]);
  });

  it('accepts 10,000 identifiers in one request', async () => {
    const identifiers = Array.from({ length: 10_000 }, (_, i) => `missing-${i}@example.test`);
    const res = await post(body({ scope: 'users', identifiers }), admin.cookie);
    expect(res.statusCode).toBe(200);
    expect(res.json().failures).toHaveLength(10_000);
    expect(res.json().targetCount).toBe(0);
  });

  it('targets one user by case-insensitive email, and reports unknown identifiers', async () => {
    const u = users[0] as TestUser;
    const res = await post(
      body({ scope: 'user', identifier: u.email.toUpperCase() }, { title: 'one' }),
      admin.cookie,
    );
    expect(res.json()).toEqual({ targetCount: 1, createdCount: 1, skippedCount: 0, failures: [] });
    const list = await app.inject({
      method: 'GET',
      url: '/notification/list',
      headers: { cookie: u.cookie },
    });
    expect(list.json().notifications[0]).toMatchObject({ title: 'one', type: 'announcement', read: false });
    const missing = await post(body({ scope: 'user', identifier: 'ghost@example.test' }), admin.cookie);
    expect(missing.json()).toEqual({
      targetCount: 0,
      createdCount: 0,
      skippedCount: 0,
      failures: [{ identifier: 'ghost@example.test', reason: 'NOT_FOUND' }],
    });
  });

  it('targets users by ids and emails, skipping banned and listing unknown', async () => {
    const [a, b, c] = users as [TestUser, TestUser, TestUser];
    await app.ctx.database.db.execute(sql`update "user" set banned = true where id = ${c.id}`);
    try {
      const res = await post(
        body(
          {
            scope: 'users',
            identifiers: [a.id, a.email, b.email.toUpperCase(), c.id, 'nobody', 'no@where.test'],
          },
          { title: 'several' },
        ),
        admin.cookie,
      );
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        targetCount: 3,
        createdCount: 2,
        skippedCount: 1,
        failures: [
          { identifier: 'nobody', reason: 'NOT_FOUND' },
          { identifier: 'no@where.test', reason: 'NOT_FOUND' },
        ],
      });
      expect(await countFor('several')).toBe(2);
    } finally {
      await app.ctx.database.db.execute(sql`update "user" set banned = false where id = ${c.id}`);
    }
  });

  it('counts a user once however often it is named, and sends to a user whose ban has expired', async () => {
    const [, , , d, e] = users as [TestUser, TestUser, TestUser, TestUser, TestUser];
    await app.ctx.database.db.execute(
      sql`update "user" set banned = true, ban_expires = now() - interval '1 hour' where id = ${d.id}`,
    );
    await app.ctx.database.db.execute(
      sql`update "user" set banned = true, ban_expires = now() + interval '1 hour' where id = ${e.id}`,
    );
    try {
      const res = await post(
        body(
          {
            scope: 'users',
            identifiers: [
              d.id,
              d.email,
              d.email.toUpperCase(),
              ` ${d.email} `,
              d.id,
              e.id,
              e.email,
              'gone',
              'gone',
            ],
          },
          { title: 'dupes' },
        ),
        admin.cookie,
      );
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        targetCount: 2,
        createdCount: 1,
        skippedCount: 1,
        failures: [{ identifier: 'gone', reason: 'NOT_FOUND' }],
      });
      expect(await countFor('dupes')).toBe(1);
    } finally {
      await app.ctx.database.db.execute(
        sql`update "user" set banned = false, ban_expires = null where id in (${d.id}, ${e.id})`,
      );
    }
  });

  it('sends to all users in batches: banned skipped, one bus message per batch, live on open streams', async () => {
    const banned = users[5] as TestUser;
    await app.ctx.database.db.update(userTable).set({ banned: true }).where(sql`id = ${banned.id}`);
    const stream = await openStream(await app.listen({ port: 0, host: '127.0.0.1' }), users[1]?.cookie);
    await stream.waitFor((e) => e.event === 'connected');
    const messages: NotificationBusMessage[] = [];
    const off = app.ctx.realtime.bus.subscribe<NotificationBusMessage>(NOTIFICATION_EVENTS_TOPIC, (m) =>
      messages.push(m),
    );
    try {
      const total = Number(
        rowsOf<{ n: number }>(
          await app.ctx.database.db.execute(sql`select count(*)::int as n from "user"`),
        )[0]?.n,
      );
      const res = await post(
        body({ scope: 'all' }, { title: 'to everyone', deliveryOptions: { strategies: ['sse'] } }),
        admin.cookie,
      );
      expect(res.json()).toEqual({
        targetCount: total,
        createdCount: total - 1,
        skippedCount: 1,
        failures: [],
      });
      expect(await countFor('to everyone')).toBe(total - 1);
      const [first, ...batches] = messages.filter((m) => m.kind === 'batch');
      // Online first: the one user holding a stream gets the first bus message, alone.
      expect(first?.kind === 'batch' && first.items.map((i) => i.userId)).toEqual([users[1]?.id]);
      // Then pages of 3 users walked by id: one bus message per page that has a recipient, never one per user. A
      // page holding only the banned or the already reached user (ids are random) publishes nothing.
      expect(batches.length).toBeGreaterThanOrEqual(Math.ceil((total - 2) / 3));
      expect(batches.length).toBeLessThanOrEqual(Math.ceil(total / 3));
      expect(batches.flatMap((m) => (m.kind === 'batch' ? m.items.map((i) => i.userId) : []))).not.toContain(
        users[1]?.id,
      );
      expect(batches.reduce((n, m) => n + (m.kind === 'batch' ? m.items.length : 0), 0)).toBe(total - 2);
      expect(batches.every((m) => m.kind === 'batch' && m.items.length <= 3)).toBe(true);
      expect(batches.flatMap((m) => (m.kind === 'batch' ? m.items.map((i) => i.userId) : []))).not.toContain(
        banned.id,
      );
      const ev = await stream.waitFor((e) => e.event === 'new_notification');
      expect((ev.data.notification as { title: string }).title).toBe('to everyone');
    } finally {
      off();
      stream.close();
      await app.ctx.database.db.update(userTable).set({ banned: false }).where(sql`id = ${banned.id}`);
    }
  });

  it('reaches the users holding a stream before walking everyone else; a banned one is still skipped', async () => {
    const db = app.ctx.database.db;
    const everyone = [admin, ...users];
    const byId = rowsOf<{ id: string }>(await db.execute(sql`select id from "user" order by id`)).map(
      (r) => r.id,
    );
    // The user the keyset walk reaches last, and one more walked earlier whom a ban (written straight to the
    // table, so the stream stays open) makes ineligible.
    const last = everyone.find((u) => u.id === byId[byId.length - 1]) as TestUser;
    const banned = everyone.find((u) => u.id !== last.id && u.id !== admin.id) as TestUser;
    const base = await app.listen({ port: 0, host: '127.0.0.1' }).catch(() => {
      const address = app.server.address();
      return typeof address === 'object' && address ? `http://127.0.0.1:${address.port}` : '';
    });
    const lastStream = await openStream(base, last.cookie);
    const bannedStream = await openStream(base, banned.cookie);
    const streams = [lastStream, bannedStream];
    try {
      for (const s of streams) await s.waitFor((e) => e.event === 'connected');
      await db.update(userTable).set({ banned: true }).where(sql`id = ${banned.id}`);
      const res = await post(
        body({ scope: 'all' }, { title: 'online first', deliveryOptions: { strategies: ['sse'] } }),
        admin.cookie,
      );
      const total = byId.length;
      expect(res.json()).toEqual({
        targetCount: total,
        createdCount: total - 1,
        skippedCount: 1,
        failures: [],
      });
      const rows = rowsOf<{ user_id: string; created_at: string }>(
        await db.execute(
          sql`select user_id, created_at::text from notification where title = 'online first' order by created_at`,
        ),
      );
      expect(rows.map((r) => r.user_id).sort()).toEqual(byId.filter((id) => id !== banned.id).sort());
      // Written in its own transaction before the walk's first page (pages of 3, so the walk alone would have
      // written the greatest id last).
      expect(rows[0]?.user_id).toBe(last.id);
      expect(rows.filter((r) => r.created_at === rows[0]?.created_at)).toHaveLength(1);
      const ev = await lastStream.waitFor((e) => e.event === 'new_notification');
      expect((ev.data.notification as { title: string }).title).toBe('online first');
      expect(bannedStream.events.some((e) => e.event === 'new_notification')).toBe(false);
    } finally {
      for (const s of streams) s.close();
      await db.update(userTable).set({ banned: false }).where(sql`id = ${banned.id}`);
    }
  });

  it('Idempotency-Key: same body returns the first result without sending again; other body is 409', async () => {
    const payload = body({ scope: 'users', identifiers: [users[2]?.id, users[3]?.id] }, { title: 'idem' });
    const key = { 'idempotency-key': 'send-42' };
    const first = await post(payload, admin.cookie, key);
    expect(first.json()).toEqual({ targetCount: 2, createdCount: 2, skippedCount: 0, failures: [] });
    const again = await Promise.all([post(payload, admin.cookie, key), post(payload, admin.cookie, key)]);
    for (const r of again) expect(r.json()).toEqual(first.json());
    expect(await countFor('idem')).toBe(2);
    const other = await post(
      { ...payload, notification: { ...payload.notification, title: 'idem 2' } },
      admin.cookie,
      key,
    );
    expect(other.statusCode).toBe(409);
    expect(await countFor('idem 2')).toBe(0);
    // without the header, the same body sends again
    await post(payload, admin.cookie);
    expect(await countFor('idem')).toBe(4);
  });
});
