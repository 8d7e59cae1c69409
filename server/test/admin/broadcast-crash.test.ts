// An idempotent admin broadcast across a crash, with real server processes sharing PostgreSQL and Redis: the
// owner is SIGKILLed mid-broadcast and a retry with the same Idempotency-Key on the other instance resumes it
// within seconds (the claim dies with its owner's heartbeat, not after a flat timer), each eligible user ending
// with exactly one notification and the response equal to a crash-free run's.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';

const ADMIN_EMAIL = `bc-admin-${randomUUID().slice(0, 8)}@example.test`;
const BULK = 3_000;
/** Every 300th bulk user is banned (skipped, counted). */
const BANNED = BULK / 300;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('idempotent broadcast across a crash (2 processes)', () => {
  let cluster: TestCluster;
  let db: pg.Client;
  let admin: { id: string; cookie: string };

  const send = (index: number, key: string, title: string) =>
    fetch(`${cluster.url(index)}/admin/notifications/send`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        origin: CLUSTER_ORIGIN,
        cookie: admin.cookie,
        'idempotency-key': key,
      },
      body: JSON.stringify({
        target: { scope: 'all' },
        notification: {
          type: 'announcement',
          title,
          content: 'Resumable broadcast',
          deliveryOptions: { strategies: ['sse'] },
        },
      }),
    });
  const count = async (text: string, values: unknown[] = []) =>
    Number((await db.query<{ n: number }>(text, values)).rows[0]?.n);

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: { ADMIN_EMAILS: ADMIN_EMAIL, BROADCAST_BATCH_SIZE: '50', LOG_LEVEL: 'warn' },
    });
    admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, name: 'Admin' });
    db = new pg.Client({ connectionString: cluster.db.url });
    await db.connect();
    // Volume through SQL: signing up thousands of users over HTTP would dominate the test's time.
    await db.query(
      `insert into "user" (id, name, email, email_verified, banned)
       select 'bulk-' || lpad(g::text, 5, '0'), 'Bulk ' || g, 'bulk' || g || '@example.test', true, g % 300 = 0
       from generate_series(1, $1::int) g`,
      [BULK],
    );
  }, 90_000);
  afterAll(async () => {
    await db?.end();
    await cluster?.close();
  });

  it('a retry after SIGKILL mid-broadcast resumes it within seconds: everyone notified exactly once', async () => {
    const key = `crash-${randomUUID()}`;
    const title = `Crash test ${key}`;
    const total = BULK + 1; // the bulk users and the admin
    const eligible = total - BANNED;
    const reached = () => count('select count(*)::int as n from notification where title = $1', [title]);

    // Holding a lock on a user in the middle of the keyset order parks the broadcast there (its batch insert
    // waits on the foreign-key check), so the crash lands mid-way deterministically, with the owner alive.
    const locker = new pg.Client({ connectionString: cluster.db.url });
    await locker.connect();
    const mid = (
      await locker.query<{ id: string }>(
        `select id from "user" where id >= (select id from "user" order by id offset $1 limit 1) and not banned order by id limit 1`,
        [Math.floor(total / 2)],
      )
    ).rows[0]?.id;
    await locker.query('begin');
    await locker.query('select id from "user" where id = $1 for update', [mid]);
    try {
      const first = send(0, key, title).catch((err: unknown) => err);
      const deadline = Date.now() + 30_000;
      while ((await reached()) === 0) {
        if (Date.now() > deadline) throw new Error('the broadcast never started');
        await delay(50);
      }

      // The owner is alive (heartbeat fresh): a concurrent retry is refused, also after longer than the
      // dead-instance bound (DEAD_INSTANCE_MS = 3 s in the cluster), because the heartbeat keeps the claim.
      const busy = await send(1, key, title);
      expect(busy.status).toBe(409);
      expect(await busy.json()).toMatchObject({ code: 'IDEMPOTENCY_IN_PROGRESS' });
      await delay(4_000);
      const stillBusy = await send(1, key, title);
      expect(stillBusy.status).toBe(409);
      await stillBusy.body?.cancel();

      const before = await reached();
      expect(before).toBeGreaterThan(0);
      expect(before).toBeLessThan(eligible);
      expect((await cluster.kill(0, 'SIGKILL')).signal).toBe('SIGKILL');
      await first;
    } finally {
      await locker.query('rollback');
      await locker.end();
    }

    // The retry on the survivor: refused only until the dead owner's heartbeat goes stale, then it resumes.
    const started = Date.now();
    let refusedUntil = 0;
    let res: Response | undefined;
    while (Date.now() - started < 60_000) {
      res = await send(1, key, title);
      if (res.status !== 409) break;
      refusedUntil = Date.now() - started;
      expect(await res.json()).toMatchObject({ code: 'IDEMPOTENCY_IN_PROGRESS' });
      await delay(250);
    }
    expect(res?.status).toBe(200);
    // Taken over once the owner's heartbeat is DEAD_INSTANCE_MS (3 s) old, not after a flat 10 minutes.
    expect(refusedUntil).toBeLessThan(15_000);
    const result = await res?.json();
    // What a crash-free run answers: every user targeted, banned ones skipped, everyone else counted once.
    expect(result).toEqual({
      targetCount: total,
      createdCount: eligible,
      skippedCount: BANNED,
      failures: [],
    });

    const dupes = await db.query(
      'select user_id from notification where title = $1 group by user_id having count(*) > 1',
      [title],
    );
    expect(dupes.rows).toEqual([]);
    expect(await reached()).toBe(eligible);
    // All of them carry one source key, the broadcast's (what makes a further resumption skip them).
    const keys = await db.query<{ source_key: string | null; n: number }>(
      'select source_key, count(*)::int as n from notification where title = $1 group by source_key',
      [title],
    );
    expect(keys.rows).toEqual([{ source_key: expect.stringMatching(/^admin\.broadcast:/), n: eligible }]);
    expect(
      await count(
        `select count(*)::int as n from "user" u
         where not u.banned and not exists (select 1 from notification n where n.user_id = u.id and n.title = $1)`,
        [title],
      ),
    ).toBe(0);

    // After completion a retry (on either instance) gets the stored result and sends nothing.
    await cluster.start(0);
    for (const index of [0, 1]) {
      const again = await send(index, key, title);
      expect(again.status).toBe(200);
      expect(await again.json()).toEqual(result);
    }
    expect(await reached()).toBe(eligible);
  }, 120_000);
});
