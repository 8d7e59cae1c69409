// Shutdown drains (CONTRACT §8), with real server processes sharing PostgreSQL:
// - an idempotent broadcast still running when SHUTDOWN_GRACE_MS ends is answered 503 UNAVAILABLE (not reset),
//   its claim released first, so the client's immediate retry on the other instance takes it over and
//   completes it, each user notified exactly once (the dead-instance bound is 60 s here: only the release can
//   explain a prompt takeover);
// - a request in flight at SIGTERM gets its full response when it finishes within the grace, while new
//   connections are refused; the pools close after it (no "Cannot use a pool after calling end"), exit 0.
// A row lock held by the test parks the request in the database mid-way, deterministically.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';

const ADMIN_EMAIL = `drain-admin-${randomUUID().slice(0, 8)}@example.test`;
const BULK = 3_000;
/** Every 300th bulk user is banned (skipped, counted). */
const BANNED = BULK / 300;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('shutdown drains in-flight requests (2 processes)', () => {
  let cluster: TestCluster;
  let db: pg.Client;
  let admin: { id: string; cookie: string };

  const send = (index: number, body: unknown, key?: string) =>
    fetch(`${cluster.url(index)}/admin/notifications/send`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        origin: CLUSTER_ORIGIN,
        cookie: admin.cookie,
        ...(key ? { 'idempotency-key': key } : {}),
      },
      body: JSON.stringify(body),
    });
  const count = async (text: string, values: unknown[] = []) =>
    Number((await db.query<{ n: number }>(text, values)).rows[0]?.n);
  /** Locks one user row (FOR UPDATE): a batch insert for that user waits on its foreign-key check. */
  const lockUser = async (id: string) => {
    const locker = new pg.Client({ connectionString: cluster.db.url });
    await locker.connect();
    await locker.query('begin');
    await locker.query('select id from "user" where id = $1 for update', [id]);
    return {
      async release() {
        await locker.query('rollback').catch(() => {});
        await locker.end().catch(() => {});
      },
    };
  };
  const logFrom = (index: number) => cluster.logs(index).length;

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: {
        ADMIN_EMAILS: ADMIN_EMAIL,
        BROADCAST_BATCH_SIZE: '50',
        LOG_LEVEL: 'info',
        // A claim is taken over after a minute of silence only: a prompt retry needs the release.
        DEAD_INSTANCE_MS: '60000',
        REGISTRY_TTL_MS: '60000',
      },
      // Instance 0 cuts requests short quickly; instance 1 lets them finish.
      envFor: (i): Record<string, string> => ({ SHUTDOWN_GRACE_MS: i === 0 ? '1500' : '30000' }),
    });
    admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, name: 'Admin' });
    db = new pg.Client({ connectionString: cluster.db.url });
    await db.connect();
    await db.query(
      `insert into "user" (id, name, email, email_verified, banned)
       select 'bulk-' || lpad(g::text, 5, '0'), 'Bulk ' || g, 'bulk' || g || '@example.test', true, g % 300 = 0
       from generate_series(1, $1::int) g`,
      [BULK],
    );
  }, 180_000);
  afterAll(async () => {
    await db?.end();
    await cluster?.close();
  });

  it('a broadcast cut short by SIGTERM answers 503 and its retry on another instance completes it at once', async () => {
    const key = `drain-${randomUUID()}`;
    const title = `Drain test ${key}`;
    const body = {
      target: { scope: 'all' },
      notification: {
        type: 'announcement',
        title,
        content: 'Cut short by a shutdown',
        deliveryOptions: { strategies: ['sse'] },
      },
    };
    const total = BULK + 1; // the bulk users and the admin
    const eligible = total - BANNED;
    const reached = () => count('select count(*)::int as n from notification where title = $1', [title]);
    const [mid] = (
      await db.query<{ id: string }>(
        `select id from "user" where id >= (select id from "user" order by id offset $1 limit 1) and not banned
         order by id limit 1`,
        [Math.floor(total / 2)],
      )
    ).rows;
    const lock = await lockUser(String(mid?.id));
    try {
      const first = send(0, body, key).then(
        async (res) => ({ status: res.status, body: (await res.json()) as Record<string, unknown> }),
        (err: unknown) => ({ status: -1, body: { error: String(err) } }),
      );
      const deadline = Date.now() + 30_000;
      while ((await reached()) === 0) {
        if (Date.now() > deadline) throw new Error('the broadcast never started');
        await delay(50);
      }
      const exit = cluster.kill(0, 'SIGTERM');
      // Answered (not reset) once the grace is over, with the contract's error body.
      const answer = await first;
      expect(answer).toEqual({ status: 503, body: { code: 'UNAVAILABLE', message: expect.any(String) } });
      const before = await reached();
      expect(before).toBeGreaterThan(0);
      expect(before).toBeLessThan(eligible);
      await lock.release();

      // Retried on the other instance right away: no 409, the claim was released before the 503.
      const retry = await send(1, body, key);
      expect(retry.status).toBe(200);
      expect(await retry.json()).toEqual({
        targetCount: total,
        createdCount: eligible,
        skippedCount: BANNED,
        failures: [],
      });
      expect((await exit).code).toBe(0);
    } finally {
      await lock.release();
    }
    const dupes = await db.query(
      'select user_id from notification where title = $1 group by user_id having count(*) > 1',
      [title],
    );
    expect(dupes.rows).toEqual([]);
    expect(await reached()).toBe(eligible);
    const logs = cluster.logs(0).join('\n');
    expect(logs).toContain('shutdown grace over');
    expect(logs).not.toContain('Cannot use a pool after calling end');
  }, 120_000);

  it('a request in flight at SIGTERM gets its full response, new connections are refused, then exit 0', async () => {
    const target = `bulk-${String(7).padStart(5, '0')}`;
    const lock = await lockUser(target);
    const from = logFrom(1);
    let exit: ReturnType<TestCluster['kill']> | undefined;
    try {
      const inFlight = send(1, {
        target: { scope: 'users', identifiers: [target] },
        notification: {
          type: 'info',
          title: `in flight ${randomUUID()}`,
          content: 'finishes during the drain',
        },
      }).then(
        async (res) => ({ status: res.status, body: (await res.json()) as Record<string, unknown> }),
        (err: unknown) => ({ status: -1, body: { error: String(err) } }),
      );
      // The send is parked on the lock (its statement is waiting), then the instance is told to stop.
      const waitingSince = Date.now();
      while (
        (await count(
          `select count(*)::int as n from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock' and application_name = $1`,
          [`herald:${cluster.instanceId(1)}`],
        )) === 0
      ) {
        if (Date.now() - waitingSince > 20_000) throw new Error('the send never reached the lock');
        await delay(50);
      }
      exit = cluster.kill(1, 'SIGTERM');
      await cluster.waitForLog(1, 'waiting for in-flight requests', 15_000, from);
      // Draining: the listener is closed, a new connection is refused.
      const fresh = await fetch(`${cluster.url(1)}/health`).then(
        (res) => `status ${res.status}`,
        (err: unknown) => String((err as { cause?: { code?: string } }).cause?.code ?? err),
      );
      expect(fresh).toBe('ECONNREFUSED');
      expect(cluster.isRunning(1)).toBe(true);
      await lock.release();
      expect(await inFlight).toEqual({
        status: 200,
        body: { targetCount: 1, createdCount: 1, skippedCount: 0, failures: [] },
      });
    } finally {
      await lock.release();
    }
    expect(await exit).toEqual({ code: 0, signal: null });
    const lines = cluster.logs(1).slice(from).join('\n');
    expect(lines).toContain('in-flight requests drained');
    expect(lines).not.toContain('Cannot use a pool after calling end');
    expect(lines).not.toContain('shutdown grace over');
  }, 90_000);
});
