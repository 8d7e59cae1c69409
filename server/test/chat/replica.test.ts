// Chat history and room lists on a real streaming replica (DATABASE_READ_URL), with read-your-writes across
// instances: a private primary and replica (helpers/pg-replica.ts) and two app instances sharing one store prefix.
// Replay is paused where a test must prove that a read was answered by a source that has the change (the replica
// then really lacks it, checked by reading it directly); where a read ran is observed in /metrics
// (`database.reads.byFeature.chat`). Then a representative subset of the room tests (rooms.test.ts) runs twice:
// primary only, and with the replica.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { PG_BIN_DIR, type ReplicaPair, startReplicaPair } from '../helpers/pg-replica.js';
import { startRedisServer, type TestRedis } from '../helpers/redis-server.js';
import { createAdmin, createVerifiedUser, requestAs, type TestUser } from '../helpers/users.js';
import { type ChatClient, chatUrl, openChat } from '../helpers/ws-client.js';

const METRICS_KEY = 'replica-metrics-key-replica-metrics-key';
// Long enough that the paused-replay checks run while the replica still serves other reads (so only the
// read-your-writes check can send a read to the primary), short enough that the lag test waits a few seconds.
const MAX_LAG_MS = 5_000;

interface Target {
  primary: number;
  replica: number;
}
interface DbMetrics {
  reads: Target & { byFeature: { chat: Target; notifications: Target }; probes: Target };
  replicas: Array<{ name: string; up: boolean; eligible: boolean; lagMs: number | null }>;
}
interface Msg {
  id: string;
  seq: number;
  message: string;
  editedAt?: string;
}
interface RoomBody {
  id: string;
  lastSeq: number;
  unreadCount?: number;
  lastReadSeq?: number;
}

/** Two instances of one deployment, listening (sockets need a port), with the helpers every test uses. */
async function world(env: TestEnv, instance: Record<string, string>) {
  const apps = [
    await env.app({ ...instance, INSTANCE_ID: 'replica-a' }),
    await env.app({ ...instance, INSTANCE_ID: 'replica-b' }),
  ] as const;
  await Promise.all(apps.map((x) => x.listen({ port: 0, host: '127.0.0.1' })));
  const clients: ChatClient[] = [];
  const api = (app: App, user: TestUser | null, method: string, url: string, payload?: unknown) =>
    requestAs(app, user, method as 'GET', url, payload);
  const ok = async <T>(app: App, user: TestUser, method: string, url: string, payload?: unknown) => {
    const res = await api(app, user, method, url, payload);
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res.json() as T;
  };
  return {
    a: apps[0],
    b: apps[1],
    api,
    ok,
    async open(app: App, user: TestUser) {
      const c = await openChat(`${chatUrl(app)}?rooms=1`, { cookie: user.cookie });
      clients.push(c);
      return c;
    },
    async createRoom(app: App, owner: TestUser, kind: 'public' | 'private', memberIds: string[] = []) {
      const body = await ok<{ room: RoomBody }>(app, owner, 'POST', '/chat/rooms', {
        name: `room ${randomUUID().slice(0, 6)}`,
        kind,
        memberIds,
      });
      return body.room;
    },
    async send(c: ChatClient, roomId: string, message: string) {
      const clientMessageId = randomUUID();
      c.send({ type: 'send_message', roomId, message, clientMessageId });
      return (await c.next('new_message', (e) => e.message.clientMessageId === clientMessageId))
        .message as Msg;
    },
    history: async (app: App, user: TestUser, roomId: string, query = '') =>
      ok<{ messages: Msg[]; hasMore: boolean }>(app, user, 'GET', `/chat/rooms/${roomId}/messages${query}`),
    rooms: async (app: App, user: TestUser, scope = 'mine') =>
      (await ok<{ rooms: RoomBody[] }>(app, user, 'GET', `/chat/rooms?scope=${scope}`)).rooms,
    async close() {
      await Promise.allSettled(clients.map((c) => c.close()));
    },
  };
}

describe.skipIf(!PG_BIN_DIR)('chat reads with read replicas', () => {
  let pair: ReplicaPair;
  const replicaInstance = (database: string) => ({
    // The replica pair is private: it replaces the env's database (and PgBouncer mode does not apply to it).
    DATABASE_URL: pair.primaryUrl(database),
    DATABASE_DIRECT_URL: '',
    DATABASE_READ_URL: pair.replicaUrl(database),
    DATABASE_READ_MAX_LAG_MS: String(MAX_LAG_MS),
    DATABASE_READ_POLL_MS: '25',
    METRICS_API_KEY: METRICS_KEY,
  });
  const chatEnv = () =>
    createTestEnv({
      CHAT_THROTTLE_LIMIT: '1000',
      CHAT_FRAME_LIMIT: '1000',
      CHAT_ROOM_CREATES_PER_HOUR: '100',
    });

  beforeAll(async () => {
    pair = await startReplicaPair();
    await pair.primarySql('create database herald');
    await pair.primarySql('create database herald_rooms');
    await pair.primarySql('create database herald_outage');
    await pair.caughtUp();
  }, 240_000);
  afterAll(async () => {
    await pair?.close();
  });

  describe('on a streaming replica, across two instances', () => {
    let env: TestEnv;
    let w: Awaited<ReturnType<typeof world>>;
    let alice: TestUser;
    let bob: TestUser;
    let carol: TestUser;
    let room: RoomBody;
    let quiet: RoomBody;

    const dbMetrics = async (app: App): Promise<DbMetrics> => {
      const res = await app.inject({
        method: 'GET',
        url: '/metrics',
        headers: { authorization: `Bearer ${METRICS_KEY}` },
      });
      expect(res.statusCode).toBe(200);
      return (res.json() as { database: DbMetrics }).database;
    };
    /** Chat reads on instance B since `before`, by where they ran. */
    const chatReadsSince = async (before: DbMetrics) => {
      const now = (await dbMetrics(w.b)).reads.byFeature.chat;
      return {
        primary: now.primary - before.reads.byFeature.chat.primary,
        replica: now.replica - before.reads.byFeature.chat.replica,
      };
    };
    /** Until the router says the replica serves reads (or not); `down`: also that it stopped answering polls. */
    const waitForReplica = async (app: App, eligible: boolean, timeoutMs = 20_000, down = false) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = await dbMetrics(app);
        if (m.replicas[0]?.eligible === eligible && (!down || m.replicas[0]?.up === false)) return m;
        if (Date.now() > deadline)
          throw new Error(`replica never became eligible=${eligible}: ${JSON.stringify(m)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    /** Reads the replica directly: what it has replayed, whatever the app chose. */
    const onReplica = async <T extends pg.QueryResultRow>(text: string, values: unknown[]) => {
      const client = new pg.Client({ connectionString: pair.replicaUrl('herald') });
      await client.connect();
      try {
        return (await client.query<T>(text, values)).rows;
      } finally {
        await client.end();
      }
    };
    const paused = async (fn: () => Promise<void>) => {
      await pair.pauseReplay();
      try {
        await fn();
      } finally {
        await pair.resumeReplay();
      }
      await pair.caughtUp();
    };

    beforeAll(async () => {
      env = await chatEnv();
      w = await world(env, replicaInstance('herald'));
      [alice, bob, carol] = await Promise.all([
        createVerifiedUser(w.a, env.smtp, { name: 'Alice', username: 'alice_rep' }),
        createVerifiedUser(w.a, env.smtp, { name: 'Bob', username: 'bob_rep' }),
        createVerifiedUser(w.a, env.smtp, { name: 'Carol', username: 'carol_rep' }),
      ]);
      room = await w.createRoom(w.a, alice, 'private', [bob.id]);
      quiet = await w.createRoom(w.a, alice, 'private', [bob.id]);
      const s = await w.open(w.a, alice);
      for (let i = 1; i <= 3; i++) await w.send(s, room.id, `before ${i}`);
      await w.send(s, quiet.id, 'quiet');
      await pair.caughtUp();
    }, 120_000);
    afterAll(async () => {
      await w?.close();
      await env?.close();
    });

    it('serves history and room lists from the replica, counted as chat reads', async () => {
      await waitForReplica(w.b, true);
      const before = await dbMetrics(w.b);
      expect((await w.history(w.b, bob, room.id)).messages.map((m) => m.message)).toEqual([
        'before 1',
        'before 2',
        'before 3',
      ]);
      expect((await w.rooms(w.b, carol, 'public')).map((r) => r.id)).not.toContain(room.id);
      expect(await chatReadsSince(before)).toEqual({ primary: 0, replica: 2 });
    });

    it('serves a read right after a change from the replica once it has replayed it', async () => {
      await waitForReplica(w.b, true);
      const busy = await w.createRoom(w.a, alice, 'private', [bob.id]);
      const s = await w.open(w.a, alice);
      // Whether a read issued within a millisecond of the commit finds the change replayed is a race the router
      // settles correctly either way (primary when not yet, checked on every read in the loop below). Once the
      // replica has replayed it (caughtUp), the read must be served there: from the polled position or, before
      // the next poll, by asking the replica (probe).
      for (let i = 0; i < 3; i++) {
        const sent = await w.send(s, busy.id, `busy ${i}`);
        await pair.caughtUp();
        const before = await dbMetrics(w.b);
        expect((await w.history(w.b, bob, busy.id)).messages.at(-1)?.id).toBe(sent.id);
        expect(await chatReadsSince(before)).toEqual({ primary: 0, replica: 1 });
      }
      for (let i = 3; i < 10; i++) {
        const sent = await w.send(s, busy.id, `busy ${i}`);
        expect((await w.history(w.b, bob, busy.id)).messages.at(-1)?.id).toBe(sent.id);
      }
    });

    it('shows a change on another instance at once: send, edit, delete, mark read, and others after the frame', async () => {
      await waitForReplica(w.b, true);
      const s = await w.open(w.a, alice);
      // Edits and deletions reach subscribers only.
      s.send({ type: 'subscribe', roomId: room.id });
      await s.next('subscribed', (e) => e.roomId === room.id);
      await paused(async () => {
        // A read that depends on no change since the pause still goes to the replica: the check is per key.
        let before = await dbMetrics(w.b);
        await w.history(w.b, bob, quiet.id);
        expect(await chatReadsSince(before)).toEqual({ primary: 0, replica: 1 });

        const sent = await w.send(s, room.id, 'while paused');
        const general = await w.send(s, 'general', 'general while paused');
        before = await dbMetrics(w.b);
        // The author, right away on instance B.
        expect((await w.history(w.b, alice, room.id)).messages.map((m) => m.message)).toContain(
          'while paused',
        );
        // Another member who only saw the live frame: the room's own position sends the read to a source with it.
        expect((await w.history(w.b, bob, room.id)).messages.at(-1)).toMatchObject({ id: sent.id, seq: 4 });
        const legacy = await w.ok<{ messages: Msg[] }>(w.b, bob, 'GET', '/chat/history?limit=5');
        expect(legacy.messages.at(-1)?.id).toBe(general.id);
        // Bob's room list: the room's last message and his unread count include it.
        expect((await w.rooms(w.b, bob)).find((r) => r.id === room.id)).toMatchObject({
          lastSeq: 4,
          unreadCount: 4,
        });
        expect(await chatReadsSince(before)).toEqual({ primary: 4, replica: 0 });
        // Each asked the replica for its replay position first (the polled one was older than the change): no.
        const probes = (await dbMetrics(w.b)).reads.probes;
        expect(probes.primary - before.reads.probes.primary).toBe(4);
        expect(probes.replica - before.reads.probes.replica).toBe(0);
        // And the replica really lacks it.
        expect(await onReplica('select id from chat_message where id = $1', [sent.id])).toEqual([]);

        // Edit and delete (socket), mark read (HTTP on A): each read back at once on B.
        s.send({ type: 'edit_message', roomId: room.id, messageId: sent.id, message: 'edited while paused' });
        await s.next('message_updated', (e) => e.message.id === sent.id);
        const edited = (await w.history(w.b, bob, room.id)).messages.at(-1);
        expect(edited).toMatchObject({ id: sent.id, message: 'edited while paused' });
        expect(edited?.editedAt).toBeDefined();
        s.send({ type: 'delete_message', roomId: room.id, messageId: sent.id });
        await s.next('message_deleted', (e) => e.messageId === sent.id);
        expect((await w.history(w.b, alice, room.id)).messages.map((m) => m.id)).not.toContain(sent.id);
        await w.ok(w.a, bob, 'POST', `/chat/rooms/${room.id}/read`, { seq: 3 });
        expect((await w.rooms(w.b, bob)).find((r) => r.id === room.id)).toMatchObject({
          lastReadSeq: 3,
          unreadCount: 0,
        });
      });
    });

    it('refuses a removed member at once although the replica still lists them', async () => {
      await waitForReplica(w.b, true);
      const secret = await w.createRoom(w.a, alice, 'private', [carol.id]);
      const s = await w.open(w.a, alice);
      await w.send(s, secret.id, 'for carol');
      await pair.caughtUp();
      expect((await w.history(w.b, carol, secret.id)).messages).toHaveLength(1);
      await paused(async () => {
        await w.ok(w.a, alice, 'DELETE', `/chat/rooms/${secret.id}/members/${carol.id}`);
        await w.send(s, secret.id, 'after carol left');
        // The replica has not replayed the removal: a membership check there would let carol in.
        expect(
          await onReplica('select user_id from chat_member where room_id = $1 and user_id = $2', [
            secret.id,
            carol.id,
          ]),
        ).toHaveLength(1);
        for (const app of [w.a, w.b]) {
          const res = await w.api(app, carol, 'GET', `/chat/rooms/${secret.id}/messages`);
          expect(res.statusCode).toBe(404);
          expect(res.json()).toEqual({ code: 'NOT_FOUND', message: 'Room not found' });
          expect((await w.rooms(app, carol)).map((r) => r.id)).not.toContain(secret.id);
        }
      });
    });

    it('moves reads to the primary once paused replication is further behind than the bound, and back after', async () => {
      await waitForReplica(w.b, true);
      const s = await w.open(w.a, alice);
      await paused(async () => {
        // Alice writes on; the replica falls behind in time from here.
        await w.send(s, room.id, 'lagging 1');
        const lagging = await waitForReplica(w.b, false, MAX_LAG_MS * 5);
        expect(lagging.replicas[0]?.up).toBe(true);
        expect(lagging.replicas[0]?.lagMs).toBeGreaterThan(MAX_LAG_MS);
        const before = await dbMetrics(w.b);
        // Reads that depend on no recent change (carol's public list, bob's quiet room) go to the primary too.
        expect((await w.history(w.b, bob, quiet.id)).messages.map((m) => m.message)).toEqual(['quiet']);
        expect((await w.history(w.b, bob, room.id)).messages.at(-1)?.message).toBe('lagging 1');
        await w.rooms(w.b, carol, 'public');
        expect(await chatReadsSince(before)).toEqual({ primary: 3, replica: 0 });
      });
      await waitForReplica(w.b, true);
      const before = await dbMetrics(w.b);
      expect((await w.history(w.b, bob, room.id)).messages.at(-1)?.message).toBe('lagging 1');
      expect(await chatReadsSince(before)).toEqual({ primary: 0, replica: 1 });
    });

    it('keeps answering history when the replica stops mid-run, and uses it again when it is back', async () => {
      await waitForReplica(w.b, true);
      const expected = (await w.history(w.a, alice, room.id)).messages.map((m) => m.id);
      pair.stopReplica();
      try {
        // Reads issued at once (the routers may still think the replica is up): every one answers, correctly.
        const results = await Promise.all(
          [w.a, w.b].flatMap((app) => [
            w.history(app, bob, room.id),
            w.history(app, alice, room.id),
            w.history(app, bob, quiet.id),
          ]),
        );
        for (const r of results.filter((_, i) => i % 3 !== 2))
          expect(r.messages.map((m) => m.id)).toEqual(expected);
        for (const app of [w.a, w.b]) {
          await w.rooms(app, bob);
          await w.ok(app, bob, 'GET', '/chat/history');
        }
        // Not serving at once (a failed poll or read); reported down once polls have failed for 2 s.
        await waitForReplica(w.b, false, 20_000, true);
        expect((await w.history(w.b, bob, room.id)).messages.map((m) => m.id)).toEqual(expected);
      } finally {
        pair.startReplica();
      }
      await waitForReplica(w.b, true, 60_000);
      const before = await dbMetrics(w.b);
      await w.history(w.b, bob, quiet.id);
      expect(await chatReadsSince(before)).toEqual({ primary: 0, replica: 1 });
    });
  });

  describe('through a store outage', () => {
    let redis: TestRedis;
    let env: TestEnv;
    let w: Awaited<ReturnType<typeof world>>;
    let alice: TestUser;
    let bob: TestUser;
    const until = async (check: () => boolean, what: string, timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };

    beforeAll(async () => {
      redis = await startRedisServer();
      env = await createTestEnv({ CACHE_URL: redis.url, CHAT_THROTTLE_LIMIT: '1000' });
      w = await world(env, replicaInstance('herald_outage'));
      [alice, bob] = await Promise.all([
        createVerifiedUser(w.a, env.smtp, { name: 'Alice' }),
        createVerifiedUser(w.a, env.smtp, { name: 'Bob' }),
      ]);
    }, 120_000);
    afterAll(async () => {
      await w?.close();
      await env?.close();
      await redis?.close();
    });

    it('reads from the primary while positions cannot be recorded or looked up, and after the store returns', async () => {
      const room = await w.createRoom(w.a, alice, 'private', [bob.id]);
      const s = await w.open(w.a, alice);
      await w.send(s, room.id, 'before');
      await pair.caughtUp();
      await pair.pauseReplay();
      try {
        await redis.stop();
        await until(() => w.a.ctx.realtime.bus.isDegraded() && w.b.ctx.realtime.bus.isDegraded(), 'degraded');
        // Stored on A; its position cannot reach the store, and the replica has not replayed it.
        await w.send(s, room.id, 'during');
        for (const app of [w.a, w.b])
          expect((await w.history(app, bob, room.id)).messages.map((m) => m.message)).toEqual([
            'before',
            'during',
          ]);
        await redis.start();
        await until(
          () => !w.a.ctx.realtime.bus.isDegraded() && !w.b.ctx.realtime.bus.isDegraded(),
          'recovered',
        );
        // Whatever the store holds now, a read right after the outage still sees the change.
        for (const app of [w.b, w.a])
          expect((await w.history(app, bob, room.id)).messages.at(-1)?.message).toBe('during');
      } finally {
        await pair.resumeReplay();
      }
    });
  });

  // A representative subset of rooms.test.ts, unchanged in what it expects, with and without the replica.
  describe.each([
    { mode: 'primary only', replica: false },
    { mode: 'with a replica', replica: true },
  ])('rooms and history, $mode', ({ replica }) => {
    let env: TestEnv;
    let w: Awaited<ReturnType<typeof world>>;
    let alice: TestUser;
    let bob: TestUser;
    let carol: TestUser;
    let admin: TestUser;

    beforeAll(async () => {
      env = await chatEnv();
      w = await world(env, replica ? replicaInstance('herald_rooms') : {});
      [alice, bob, carol, admin] = await Promise.all([
        createVerifiedUser(w.a, env.smtp, { name: 'Alice', username: 'alice_each' }),
        createVerifiedUser(w.a, env.smtp, { name: 'Bob', username: 'bob_each' }),
        createVerifiedUser(w.a, env.smtp, { name: 'Carol', username: 'carol_each' }),
        createAdmin(w.a, env.smtp),
      ]);
    }, 120_000);
    afterAll(async () => {
      await w?.close();
      await env?.close();
    });

    it('creates rooms, lists mine, and hides private rooms from non-members', async () => {
      const room = await w.createRoom(w.a, alice, 'private', [bob.id]);
      expect((await w.rooms(w.b, bob)).map((r) => r.id)).toEqual(
        expect.arrayContaining([room.id, 'general']),
      );
      for (const url of [`/chat/rooms/${room.id}`, `/chat/rooms/${room.id}/messages`]) {
        const res = await w.api(w.b, carol, 'GET', url);
        expect(res.statusCode, url).toBe(404);
        expect(res.json()).toEqual({ code: 'NOT_FOUND', message: 'Room not found' });
      }
      expect((await w.rooms(w.b, carol)).map((r) => r.id)).not.toContain(room.id);
    });

    it('lets anyone join a public room and counts unread messages per member', async () => {
      const room = await w.createRoom(w.a, alice, 'public');
      expect((await w.rooms(w.b, carol, 'public')).map((r) => r.id)).toContain(room.id);
      await w.ok(w.b, carol, 'POST', `/chat/rooms/${room.id}/join`);
      expect((await w.rooms(w.a, carol)).map((r) => r.id)).toContain(room.id);
      const s = await w.open(w.a, alice);
      await w.send(s, room.id, 'one');
      await w.send(s, room.id, 'two');
      expect((await w.rooms(w.b, carol))[0]).toMatchObject({
        id: room.id,
        lastSeq: 2,
        lastReadSeq: 0,
        unreadCount: 2,
      });
      expect(await w.ok(w.a, carol, 'POST', `/chat/rooms/${room.id}/read`, { seq: 1 })).toEqual({
        lastReadSeq: 1,
        unreadCount: 1,
      });
      expect((await w.rooms(w.b, carol))[0]).toMatchObject({ lastReadSeq: 1, unreadCount: 1 });
    });

    it('pages a room by seq with hasMore in both directions, on either instance', async () => {
      const room = await w.createRoom(w.a, alice, 'private');
      const s = await w.open(w.a, alice);
      for (let i = 1; i <= 5; i++) await w.send(s, room.id, `p${i}`);
      const last = await w.history(w.b, alice, room.id, '?limit=2');
      expect(last.messages.map((m) => m.seq)).toEqual([4, 5]);
      expect(last.hasMore).toBe(true);
      const older = await w.history(w.b, alice, room.id, '?before=4&limit=10');
      expect(older.messages.map((m) => m.message)).toEqual(['p1', 'p2', 'p3']);
      expect(older.hasMore).toBe(false);
      const newer = await w.history(w.a, alice, room.id, '?after=2&limit=2');
      expect(newer.messages.map((m) => m.seq)).toEqual([3, 4]);
      expect(newer.hasMore).toBe(true);
    });

    it('pages general with GET /chat/history right after a send on the other instance', async () => {
      const s = await w.open(w.a, alice);
      const sent = await w.send(s, 'general', `hello ${randomUUID().slice(0, 6)}`);
      const page = await w.ok<{ messages: Msg[] }>(w.b, bob, 'GET', '/chat/history?limit=3');
      expect(page.messages.at(-1)?.id).toBe(sent.id);
      const older = await w.ok<{ messages: Msg[] }>(w.b, bob, 'GET', `/chat/history?before=${sent.id}`);
      expect(older.messages.map((m) => m.id)).not.toContain(sent.id);
    });

    it('purges a user in every room, gone from history on the other instance at once', async () => {
      const victim = await createVerifiedUser(w.a, env.smtp, { name: 'Victim' });
      const room = await w.createRoom(w.a, victim, 'private', [bob.id]);
      const v = await w.open(w.a, victim);
      await w.send(v, room.id, 'bad 1');
      await w.send(v, 'general', 'bad 2');
      expect(await w.ok(w.a, admin, 'DELETE', `/admin/users/${victim.id}/messages`)).toEqual({
        deletedCount: 2,
      });
      expect((await w.history(w.b, bob, room.id)).messages).toEqual([]);
      const general = await w.ok<{ messages: Array<{ userId: string }> }>(w.b, bob, 'GET', '/chat/history');
      expect(general.messages.map((m) => m.userId)).not.toContain(victim.id);
    });
  });
});
