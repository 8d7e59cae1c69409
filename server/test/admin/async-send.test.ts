// Asynchronous admin sends (CONTRACT §5, "Large sends") with real server processes sharing PostgreSQL and Redis:
// `Prefer: respond-async` and the audience threshold answer 202 with a progress resource; an Idempotency-Key
// returns the same sendId; the owner SIGKILLed mid-send is taken over by the other instance, a SIGTERMed owner
// hands the send back at once; either way every eligible user ends with exactly one notification and the final
// counts equal a crash-free run's. Bad and unauthorised input on both routes.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';

const ADMIN_EMAIL = `as-admin-${randomUUID().slice(0, 8)}@example.test`;
const BULK = 2_000;
/** Every 250th bulk user is banned (skipped, counted). */
const BANNED = BULK / 250;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Send {
  sendId: string;
  status: string;
  targetCount: number;
  createdCount: number;
  skippedCount: number;
  failures: Array<{ identifier: string; reason: string }>;
  finishedAt: string | null;
}

describe('asynchronous sends (2 processes)', () => {
  let cluster: TestCluster;
  let db: pg.Client;
  let admin: { id: string; cookie: string };
  let member: { id: string; cookie: string };

  const headers = (cookie: string | null, extra: Record<string, string> = {}) => ({
    'content-type': 'application/json',
    origin: CLUSTER_ORIGIN,
    ...(cookie ? { cookie } : {}),
    ...extra,
  });
  const send = (
    index: number,
    body: unknown,
    extra: Record<string, string> = {},
    cookie: string | null = admin.cookie,
  ) =>
    fetch(`${cluster.url(index)}/admin/notifications/send`, {
      method: 'POST',
      headers: headers(cookie, extra),
      body: JSON.stringify(body),
    });
  const all = (title: string) => ({
    target: { scope: 'all' },
    notification: { type: 'announcement', title, content: 'async', deliveryOptions: { strategies: ['sse'] } },
  });
  const progress = async (index: number, id: string, cookie: string | null = admin.cookie) =>
    fetch(`${cluster.url(index)}/admin/notifications/sends/${id}`, { headers: headers(cookie) });
  const until = async (index: number, id: string, status: string, timeoutMs = 60_000): Promise<Send> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await progress(index, id);
      expect(res.status).toBe(200);
      const body = (await res.json()) as Send;
      if (body.status === status) return body;
      if (Date.now() > deadline)
        throw new Error(`send ${id} never reached ${status}: ${JSON.stringify(body)}`);
      await delay(100);
    }
  };
  const count = async (text: string, values: unknown[] = []) =>
    Number((await db.query<{ n: number }>(text, values)).rows[0]?.n);
  const reached = (title: string) =>
    count('select count(*)::int as n from notification where title = $1', [title]);
  const dupes = async (title: string) =>
    (
      await db.query(
        'select user_id from notification where title = $1 group by user_id having count(*) > 1',
        [title],
      )
    ).rows;

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: {
        ADMIN_EMAILS: ADMIN_EMAIL,
        BROADCAST_BATCH_SIZE: '50',
        BROADCAST_ASYNC_THRESHOLD: '3',
        BROADCAST_QUEUE_POLL_MS: '100',
        LOG_LEVEL: 'warn',
      },
    });
    admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, name: 'Admin' });
    member = await createVerifiedUserOn(cluster, 1, { name: 'Member' });
    db = new pg.Client({ connectionString: cluster.db.url });
    await db.connect();
    await db.query(
      `insert into "user" (id, name, email, email_verified, banned)
       select 'abulk-' || lpad(g::text, 5, '0'), 'Bulk ' || g, 'abulk' || g || '@example.test', true, g % 250 = 0
       from generate_series(1, $1::int) g`,
      [BULK],
    );
  }, 180_000);
  afterAll(async () => {
    await db?.end();
    await cluster?.close();
  });

  const total = () => BULK + 2; // the bulk users, the admin and the member
  const eligible = () => total() - BANNED;

  it('Prefer: respond-async → 202 with Location; the progress resource ends done with exact counts', async () => {
    const title = `async ${randomUUID()}`;
    const res = await send(0, all(title), { prefer: 'wait=5, respond-async' });
    expect(res.status).toBe(202);
    expect(res.headers.get('preference-applied')).toBe('respond-async');
    const body = (await res.json()) as { sendId: string; status: string };
    expect(body).toEqual({ sendId: expect.any(String), status: 'queued' });
    expect(res.headers.get('location')).toBe(`/admin/notifications/sends/${body.sendId}`);
    // Readable on either instance.
    const done = await until(1, body.sendId, 'done');
    expect(done).toMatchObject({
      targetCount: total(),
      createdCount: eligible(),
      skippedCount: BANNED,
      failures: [],
    });
    expect(done.finishedAt).not.toBeNull();
    expect(await reached(title)).toBe(eligible());
    expect(await dupes(title)).toEqual([]);
  });

  it('the audience threshold decides: 3 users → 200, 4 → 202; the same Idempotency-Key → the same sendId', async () => {
    const ids = (n: number) => [admin.id, member.id, 'abulk-00001', 'abulk-00002'].slice(0, n);
    const notification = { type: 'info', title: `threshold ${randomUUID()}`, content: 'x' };
    const small = await send(0, { target: { scope: 'users', identifiers: ids(3) }, notification });
    expect(small.status).toBe(200);
    expect(await small.json()).toMatchObject({ targetCount: 3, createdCount: 3 });

    const key = `k-${randomUUID()}`;
    const body = {
      target: { scope: 'users', identifiers: [...ids(4), 'nobody@example.test'] },
      notification,
    };
    const first = await send(1, body, { 'idempotency-key': key });
    expect(first.status).toBe(202);
    const { sendId } = (await first.json()) as { sendId: string };
    const again = await send(0, body, { 'idempotency-key': key });
    expect(again.status).toBe(202);
    expect(((await again.json()) as { sendId: string }).sendId).toBe(sendId);
    const done = await until(0, sendId, 'done');
    expect(done).toMatchObject({
      targetCount: 4,
      createdCount: 4,
      skippedCount: 0,
      failures: [{ identifier: 'nobody@example.test', reason: 'NOT_FOUND' }],
    });
    const reused = await send(
      0,
      { ...body, notification: { ...notification, title: 'other' } },
      { 'idempotency-key': key },
    );
    expect(reused.status).toBe(409);
    expect(await reused.json()).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
  });

  it('bad and unauthorised input: 4xx, never a send', async () => {
    const before = await count('select count(*)::int as n from broadcast_send');
    const bad = await send(
      0,
      { target: { scope: 'all' }, notification: { type: 'nope', title: 'x', content: 'y' } },
      {
        prefer: 'respond-async',
      },
    );
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 'VALIDATION_ERROR' });
    const badUrl = await send(
      0,
      {
        target: { scope: 'all' },
        notification: {
          type: 'info',
          title: 'x',
          content: 'y',
          metadata: { actions: [{ actionId: 'a', type: 'link', label: 'l', url: 'javascript:alert(1)' }] },
        },
      },
      { prefer: 'respond-async' },
    );
    expect(badUrl.status).toBe(400);
    expect((await send(0, all('x'), { prefer: 'respond-async' }, member.cookie)).status).toBe(403);
    expect((await send(0, all('x'), { prefer: 'respond-async' }, null)).status).toBe(401);
    expect(await count('select count(*)::int as n from broadcast_send')).toBe(before);

    const unknown = await progress(0, randomUUID());
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'NOT_FOUND' });
    expect((await progress(0, 'not-a-uuid')).status).toBe(404);
    const [row] = (await db.query<{ id: string }>('select id::text as id from broadcast_send limit 1')).rows;
    expect((await progress(0, row?.id as string, member.cookie)).status).toBe(403);
    expect((await progress(0, row?.id as string, null)).status).toBe(401);
  });

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    it(`${signal} of the owner mid-send: the other instance finishes it, everyone notified exactly once`, async () => {
      const title = `${signal} ${randomUUID()}`;
      // A lock on a user in the middle of the keyset order parks the send there (its batch insert waits on the
      // foreign-key check), so the signal lands mid-way deterministically.
      const locker = new pg.Client({ connectionString: cluster.db.url });
      await locker.connect();
      const mid = (
        await locker.query<{ id: string }>(
          `select id from "user" where id >= (select id from "user" order by id offset $1 limit 1) and not banned order by id limit 1`,
          [Math.floor(total() / 2)],
        )
      ).rows[0]?.id;
      await locker.query('begin');
      await locker.query('select id from "user" where id = $1 for update', [mid]);
      let owner = -1;
      let sendId = '';
      try {
        const res = await send(0, all(title), { prefer: 'respond-async' });
        expect(res.status).toBe(202);
        sendId = ((await res.json()) as { sendId: string }).sendId;
        const deadline = Date.now() + 30_000;
        while ((await reached(title)) === 0) {
          if (Date.now() > deadline) throw new Error('the send never started');
          await delay(50);
        }
        const ownerId = (
          await db.query<{ owner_instance: string }>(
            'select owner_instance from broadcast_send where id = $1',
            [sendId],
          )
        ).rows[0]?.owner_instance;
        owner = [0, 1].find((i) => cluster.instanceId(i) === ownerId) ?? -1;
        expect(owner).toBeGreaterThanOrEqual(0);
        const partial = (await (await progress(1 - owner, sendId)).json()) as Send;
        expect(partial.status).toBe('running');
        expect(partial.createdCount).toBeLessThan(eligible());
        const killed = cluster.kill(owner, signal);
        if (signal === 'SIGKILL') await killed;
        // SIGTERM: the owner waits for its current batch (parked on the lock) before it hands the send back.
        await delay(signal === 'SIGTERM' ? 500 : 0);
      } finally {
        await locker.query('rollback');
        await locker.end();
      }
      if (signal === 'SIGTERM') {
        const exit = await cluster.exited(owner);
        expect(exit.code).toBe(0);
        // Handed back at shutdown: not waiting for a stale heartbeat.
        const row = (
          await db.query<{ status: string; owner_instance: string | null }>(
            'select status, owner_instance from broadcast_send where id = $1',
            [sendId],
          )
        ).rows[0];
        expect(row?.owner_instance === null || row?.owner_instance === cluster.instanceId(1 - owner)).toBe(
          true,
        );
      }
      const done = await until(1 - owner, sendId, 'done');
      expect(done).toMatchObject({
        targetCount: total(),
        createdCount: eligible(),
        skippedCount: BANNED,
        failures: [],
      });
      expect(await reached(title)).toBe(eligible());
      expect(await dupes(title)).toEqual([]);
      await cluster.start(owner);
    });
  }
});
