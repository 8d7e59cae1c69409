// Notification lists and counts on a real streaming replica (DATABASE_READ_URL), with read-your-writes across
// instances: a private primary and replica (helpers/pg-replica.ts), two app instances (same store prefix, same
// databases) built in-process — child processes would add two cold starts to a file that already starts two
// PostgreSQL servers. Where a read ran is observed in /metrics (`database.reads`, `database.replicas`).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { PG_BIN_DIR, type ReplicaPair, startReplicaPair } from '../helpers/pg-replica.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const METRICS_KEY = 'replica-metrics-key-replica-metrics-key';
// Long enough that a read right after a change falls inside it (the replica still serves others then), so only the
// read-your-writes check can send the writer's read to the primary.
const MAX_LAG_MS = 3_000;

interface DbMetrics {
  reads: { primary: number; replica: number; fallbacks: number };
  replicas: Array<{ name: string; up: boolean; eligible: boolean; lagMs: number | null }>;
  pools: Array<{ pool: string; total: number; idle: number; waiting: number }>;
}
type User = TestUser;
interface ListBody {
  notifications: Array<{ id: string; read: boolean; title: string }>;
  pagination: { totalCount: number };
}

describe.skipIf(!PG_BIN_DIR)('notification reads on a streaming replica', () => {
  let pair: ReplicaPair;
  let env: TestEnv;
  const apps: App[] = [];
  let writer: User;
  let other: User;
  const app = (i: number): App => {
    const a = apps[i];
    if (!a) throw new Error(`no app ${i}`);
    return a;
  };

  const dbMetrics = async (i: number): Promise<DbMetrics> => {
    const res = await app(i).inject({
      method: 'GET',
      url: '/metrics',
      headers: { authorization: `Bearer ${METRICS_KEY}` },
    });
    expect(res.statusCode).toBe(200);
    return (res.json() as { database: DbMetrics }).database;
  };
  const waitForReplica = async (i: number, eligible: boolean, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = await dbMetrics(i);
      if (m.replicas[0]?.eligible === eligible) return m;
      if (Date.now() > deadline)
        throw new Error(`replica never became eligible=${eligible}: ${JSON.stringify(m)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const get = async <T>(i: number, user: User, path: string): Promise<T> => {
    const res = await app(i).inject({ method: 'GET', url: path, headers: jsonHeaders(user.cookie) });
    expect(res.statusCode, `${path} on instance ${i}: ${res.body}`).toBe(200);
    return res.json() as T;
  };
  // The read notifications (a first page: the read cache may answer it when nothing changed since).
  const readList = (i: number, user: User) =>
    get<ListBody>(i, user, '/notification/list?filter=read&limit=50');
  // A page filtered by type is never cached, nor its total: every call is one database read, the probe of where
  // reads run. Every notification here is of type info, so its total is the user's total.
  const typedList = (i: number, user: User) =>
    get<ListBody>(i, user, '/notification/list?type=info&limit=50');
  const counts = (i: number, user: User) =>
    get<{ counts: { byStatus: { all: number; read: number; unread: number } } }>(
      i,
      user,
      '/notification/counts',
    );
  // What an admin send does (the service behind POST /admin/notifications/send), on instance 0.
  const send = async (to: User[], title: string) => {
    const result = await app(0).notifications.createForUsers(
      to.map((u) => u.id),
      { type: 'info', title, content: title },
      { strategies: ['sse'] },
    );
    expect(result.createdCount).toBe(to.length);
  };
  const markRead = async (i: number, user: User, id: string, read = true) => {
    const res = await app(i).inject({
      method: 'PATCH',
      url: `/notification/${id}/read`,
      headers: jsonHeaders(user.cookie),
      payload: { read },
    });
    expect(res.statusCode).toBe(200);
  };

  beforeAll(async () => {
    pair = await startReplicaPair();
    await pair.primarySql('create database herald');
    await pair.caughtUp();
    env = await createTestEnv();
    const instance = {
      // The replica pair is private: it replaces the env's database (and PgBouncer mode does not apply to it).
      DATABASE_URL: pair.primaryUrl('herald'),
      DATABASE_DIRECT_URL: '',
      DATABASE_READ_URL: pair.replicaUrl('herald'),
      DATABASE_READ_MAX_LAG_MS: String(MAX_LAG_MS),
      DATABASE_READ_POLL_MS: '25',
      METRICS_API_KEY: METRICS_KEY,
    };
    apps.push(await env.app(instance));
    apps.push(await env.app(instance));
    writer = await createVerifiedUser(app(0), env.smtp);
    other = await createVerifiedUser(app(1), env.smtp);
    for (let n = 0; n < 5; n++) await send([writer, other], `n${n}`);
    await pair.caughtUp();
  }, 240_000);

  afterAll(async () => {
    await env?.close();
    await pair?.close();
  });

  it('serves reads from the replica, and a change is read back at once on another instance', async () => {
    await waitForReplica(1, true);
    const before = await dbMetrics(1);
    await typedList(1, other);
    await typedList(1, writer);
    const after = await dbMetrics(1);
    expect(after.reads.replica - before.reads.replica).toBe(2);
    expect(after.pools.map((p) => p.pool)).toEqual([
      'primary',
      expect.stringMatching(/^replica:127\.0\.0\.1:/),
    ]);

    // The replica stops replaying: it is within the lag bound for a while, but does not have the next change.
    await pair.pauseReplay();
    try {
      const all = await get<ListBody>(0, writer, '/notification/list?limit=50');
      const target = all.notifications[2];
      if (!target) throw new Error('no notification to mark');
      await markRead(0, writer, target.id);
      // Instance 1, right away: the writer's own change is there (read from a source that has it).
      const list = await readList(1, writer);
      expect(list.notifications.map((n) => n.id)).toEqual([target.id]);
      expect((await counts(1, writer)).counts.byStatus).toEqual({ all: 5, read: 1, unread: 4 });
      // And the replica really lacks it: read there directly.
      const client = new pg.Client({ connectionString: pair.replicaUrl('herald') });
      await client.connect();
      try {
        const { rows } = await client.query<{ read: boolean }>(
          'select read from notification where id = $1',
          [target.id],
        );
        expect(rows[0]?.read).toBe(false);
      } finally {
        await client.end();
      }
    } finally {
      await pair.resumeReplay();
    }
    await pair.caughtUp();
  });

  it('keeps answering when the replica stops mid-run, and uses it again when it is back', async () => {
    await waitForReplica(1, true);
    pair.stopReplica();
    try {
      // Reads issued at once (the router may still think the replica is up): every one answers, correctly.
      const results = await Promise.all(
        [0, 1].flatMap((i) => [counts(i, other), counts(i, writer), readList(i, writer), readList(i, other)]),
      );
      expect(results).toHaveLength(8);
      for (const i of [0, 1]) {
        expect((await counts(i, writer)).counts.byStatus).toEqual({ all: 5, read: 1, unread: 4 });
        expect((await readList(i, other)).pagination.totalCount).toBe(0);
      }
      const down = await waitForReplica(1, false);
      expect(down.replicas[0]?.up).toBe(false);
    } finally {
      pair.startReplica();
    }
    await waitForReplica(1, true, 60_000);
    const before = await dbMetrics(1);
    await typedList(1, other);
    expect((await dbMetrics(1)).reads.replica - before.reads.replica).toBe(1);
  });

  it('moves reads to the primary once paused replication is further behind than the bound, and back after', async () => {
    await waitForReplica(1, true);
    await pair.pauseReplay();
    try {
      // Someone else's change moves the primary on; the replica falls behind in time from here.
      await send([writer], 'while paused');
      const lagging = await waitForReplica(1, false, MAX_LAG_MS * 5);
      expect(lagging.replicas[0]?.up).toBe(true);
      expect(lagging.replicas[0]?.lagMs).toBeGreaterThan(MAX_LAG_MS);
      const before = await dbMetrics(1);
      expect((await typedList(1, other)).pagination.totalCount).toBe(5);
      const after = await dbMetrics(1);
      expect(after.reads.replica).toBe(before.reads.replica);
      expect(after.reads.primary - before.reads.primary).toBe(1);
    } finally {
      await pair.resumeReplay();
    }
    await pair.caughtUp();
    await waitForReplica(1, true);
    const before = await dbMetrics(1);
    expect((await typedList(1, writer)).pagination.totalCount).toBe(6);
    expect((await dbMetrics(1)).reads.replica - before.reads.replica).toBe(1);
  });
});
