// PostgreSQL past one server (issue 28) and the list indexes (issue 27), on production-sized tables:
//   index  — GET /notification/list?page=2 (rows only once the read cache holds the total) and a page filtered by
//            type (its page and count, never cached; until 2026-11-28 /notification/counts, now served from the read
//            cache) on a N-row table (default 500,000 rows over 5,000 users), with the old DESC NULLS LAST indexes
//            and with the current ones.
//   replica — the same reads with DATABASE_READ_URL on a private primary + streaming replica (helpers/pg-replica.ts)
//            vs primary only: req/s and the CPU seconds each server spent (the machine is shared, so the ratio and the
//            split are the result, not the absolute figure); and the read-your-writes check alone (store HMGET +
//            replica choice) per request.
//   chat   — chat history (`GET /chat/rooms/:id/messages`, an older page) and the room list with unread counts
//            (`GET /chat/rooms`) on the same pair, primary only vs one replica; and what a chat change pays with
//            replicas on (read the primary's WAL position + record it on the author's and the room's keys).
//   pool   — PostgreSQL server connections used by 3 instances under load, direct and through PgBouncer.
// Requests go through app.inject (routing, session, handler, serialisation; no socket), 20 in flight.
// Usage: npx tsx bench/db-scale.ts [--only index|replica|chat|pool] [--rows 500000] [--seconds 8]
import { readdirSync, readFileSync } from 'node:fs';
import {
  createTestEnv,
  createVerifiedUser,
  jsonHeaders,
  startPgBouncer,
  startReplicaPair,
  type TestEnv,
  type TestUser,
} from '@herald/server/testkit';
import pg from 'pg';
import type { App } from '../server/src/app.js';
import { createReadPositions } from '../server/src/infra/read-positions.js';
import { numberArg, percentile, printTable, stringArg } from './_lib.js';
import { seedAtScale } from './_seed.js';

const ROWS = numberArg('rows', 500_000);
const SECONDS = numberArg('seconds', 8);
const ONLY = stringArg('only', '');
const CONCURRENCY = 20;
const USERS = 5_000;

async function load(app: App, user: TestUser, url: string): Promise<{ rps: number; p99: number }> {
  const latencies: number[] = [];
  const end = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        const t = performance.now();
        const res = await app.inject({ method: 'GET', url, headers: jsonHeaders(user.cookie) });
        if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
        latencies.push(performance.now() - t);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    rps: Math.round(latencies.length / SECONDS),
    p99: Math.round(percentile(latencies, 99) * 10) / 10,
  };
}

const OLD_INDEXES = `
  drop index if exists notification_user_created_desc_idx; drop index if exists notification_user_unread_desc_idx;
  drop index if exists notification_user_type_created_desc_idx;
  create index notification_user_created_idx on notification (user_id, created_at desc nulls last, id desc nulls last);
  create index notification_user_unread_idx on notification (user_id, created_at desc nulls last, id desc nulls last) where read = false;
  create index notification_user_type_created_idx on notification (user_id, type, created_at desc nulls last);
  analyze notification;`;
const NEW_INDEXES = `
  drop index if exists notification_user_created_idx; drop index if exists notification_user_unread_idx;
  drop index if exists notification_user_type_created_idx;
  create index notification_user_created_desc_idx on notification (user_id, created_at desc, id desc);
  create index notification_user_unread_desc_idx on notification (user_id, created_at desc, id desc) where read = false;
  create index notification_user_type_created_desc_idx on notification (user_id, type, created_at desc, id desc, read);
  analyze notification;`;

async function sqlOn(url: string, text: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

const paths = ['/notification/list?page=2&limit=20', '/notification/list?page=2&limit=20&type=info'];

async function indexBench(): Promise<void> {
  const env = await createTestEnv({ DATABASE_STATEMENT_TIMEOUT_MS: '0' });
  try {
    const app = await env.app();
    const user = await createVerifiedUser(app, env.smtp);
    await seedAtScale(env.db.url, user.id, { rows: ROWS, users: USERS });
    const rows: Array<Array<string | number>> = [];
    for (const [label, ddl] of [
      ['DESC NULLS LAST (before)', OLD_INDEXES],
      ['DESC = NULLS FIRST (after)', NEW_INDEXES],
    ] as const) {
      await sqlOn(env.db.url, ddl);
      for (const url of paths) {
        await load(app, user, url); // warm-up round, not counted
        const r = await load(app, user, url);
        rows.push([label, url, r.rps, r.p99]);
      }
    }
    table(
      `uncached reads, ${ROWS.toLocaleString('en')} rows / ${USERS} users, ${CONCURRENCY} in flight`,
      ['indexes', 'path', 'req/s', 'p99 ms'],
      rows,
    );
  } finally {
    await env.close();
  }
}

/** CPU seconds (user + system) of a PostgreSQL server: its postmaster and every backend it forked. */
function table(title: string, headers: string[], rows: Array<Array<string | number>>): void {
  printTable(
    rows.map((r) => Object.fromEntries(headers.map((h, i) => [h, r[i]]))),
    title,
  );
}

function serverCpuSeconds(postmasterPid: number): number {
  const hz = 100;
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(fields[1]);
      if (Number(entry) !== postmasterPid && ppid !== postmasterPid) continue;
      ticks += Number(fields[11]) + Number(fields[12]);
      // The postmaster's reaped children (backends that exited, e.g. idle pool connections closed) count too.
      if (Number(entry) === postmasterPid) ticks += Number(fields[13]) + Number(fields[14]);
    } catch {
      // Exited meanwhile.
    }
  }
  return ticks / hz;
}

async function replicaBench(): Promise<void> {
  const pair = await startReplicaPair();
  const env: TestEnv = await createTestEnv();
  try {
    await pair.primarySql('create database herald');
    const base = {
      DATABASE_URL: pair.primaryUrl('herald'),
      DATABASE_DIRECT_URL: '',
      DATABASE_STATEMENT_TIMEOUT_MS: '0',
    };
    const primaryOnly = await env.app(base);
    const user = await createVerifiedUser(primaryOnly, env.smtp);
    await seedAtScale(pair.primaryUrl('herald'), user.id, { rows: ROWS, users: USERS });
    await pair.caughtUp(120_000);
    const withReplica = await env.app({ ...base, DATABASE_READ_URL: pair.replicaUrl('herald') });
    const pmPid = (dir: 'primary' | 'replica') =>
      Number(readFileSync(`${pair.dataDir}/${dir}/postmaster.pid`, 'utf8').split('\n')[0]);
    const rows: Array<Array<string | number>> = [];
    for (const [label, app] of [
      ['primary only', primaryOnly],
      ['one replica', withReplica],
    ] as const) {
      for (const url of paths) {
        await load(app, user, url);
        const cpu0 = [serverCpuSeconds(pmPid('primary')), serverCpuSeconds(pmPid('replica'))];
        const r = await load(app, user, url);
        const cpu1 = [serverCpuSeconds(pmPid('primary')), serverCpuSeconds(pmPid('replica'))];
        rows.push([
          label,
          url,
          r.rps,
          r.p99,
          Math.round(((cpu1[0] ?? 0) - (cpu0[0] ?? 0)) * 10) / 10,
          Math.round(((cpu1[1] ?? 0) - (cpu0[1] ?? 0)) * 10) / 10,
        ]);
      }
    }
    table(
      `reads on a replica (${ROWS.toLocaleString('en')} rows)`,
      ['reads', 'path', 'req/s', 'p99 ms', 'primary CPU s', 'replica CPU s'],
      rows,
    );
    // The read-your-writes check alone: the store lookup of the user's position and the (local) replica choice.
    const n = 2_000;
    const t = performance.now();
    for (let i = 0; i < n; i++) {
      await withReplica.ctx.database.reads?.read(null, async () => 0, 'notifications');
    }
    const chooseUs = ((performance.now() - t) / n) * 1000;
    const redis = withReplica.ctx.store.redis?.data;
    const t2 = performance.now();
    for (let i = 0; i < n; i++) await redis?.hmget(`${env.prefix}notif:unread:${user.id}`, 'l');
    const lookupUs = ((performance.now() - t2) / n) * 1000;
    table(
      'read-your-writes check per request',
      ['part', 'µs'],
      [
        ['replica choice (cached positions, no I/O)', Math.round(chooseUs * 10) / 10],
        [
          'store HMGET of the position (uncached reads only; the first-page cache reads it with the version)',
          Math.round(lookupUs),
        ],
      ],
    );
  } finally {
    await env.close();
    await pair.close();
  }
}

const CHAT_ROOMS = 20;
const CHAT_MESSAGES_PER_ROOM = 2_000;

/** CHAT_ROOMS private rooms of `me` and one other member each, every message unread by `me` (counts up to the cap). */
async function seedChat(url: string, me: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(
      `insert into "user" (id, name, email, email_verified) select 'c' || g, 'c' || g, 'c' || g || '@example.test', true
       from generate_series(1, ${CHAT_ROOMS}) g`,
    );
    await c.query(
      `insert into chat_room (id, kind, name, created_by, last_seq, last_rev, last_message_at, member_count)
       select md5('room' || g)::uuid::text, 'private', 'room ' || g, 'c' || g, ${CHAT_MESSAGES_PER_ROOM},
              ${CHAT_MESSAGES_PER_ROOM}, now(), 2
       from generate_series(1, ${CHAT_ROOMS}) g`,
    );
    await c.query(
      `insert into chat_member (room_id, user_id, role)
       select md5('room' || g)::uuid::text, u, case when u = $1 then 'member' else 'owner' end
       from generate_series(1, ${CHAT_ROOMS}) g, unnest(array[$1, 'c' || g]) u`,
      [me],
    );
    await c.query(
      `insert into chat_message (room_id, seq, rev, user_id, user_name, message, created_at)
       select md5('room' || r)::uuid::text, s, s, 'c' || r, 'c' || r, 'Message ' || s || ': ' || md5(s::text),
              now() - (${CHAT_MESSAGES_PER_ROOM} - s) * interval '1 second'
       from generate_series(1, ${CHAT_ROOMS}) r, generate_series(1, ${CHAT_MESSAGES_PER_ROOM}) s`,
    );
    // One statement each: several in one query string run as one transaction, which VACUUM refuses.
    for (const table of ['chat_message', 'chat_member', 'chat_room'])
      await c.query(`vacuum analyze ${table}`);
    const first = await c.query<{ id: string }>(`select md5('room1')::uuid::text as id`);
    return first.rows[0]?.id ?? '';
  } finally {
    await c.end();
  }
}

async function chatReplicaBench(): Promise<void> {
  const pair = await startReplicaPair();
  const env: TestEnv = await createTestEnv();
  try {
    await pair.primarySql('create database herald');
    const base = {
      DATABASE_URL: pair.primaryUrl('herald'),
      DATABASE_DIRECT_URL: '',
      DATABASE_STATEMENT_TIMEOUT_MS: '0',
    };
    const primaryOnly = await env.app(base);
    const user = await createVerifiedUser(primaryOnly, env.smtp);
    const roomId = await seedChat(pair.primaryUrl('herald'), user.id);
    await pair.caughtUp(120_000);
    const withReplica = await env.app({ ...base, DATABASE_READ_URL: pair.replicaUrl('herald') });
    const pmPid = (dir: 'primary' | 'replica') =>
      Number(readFileSync(`${pair.dataDir}/${dir}/postmaster.pid`, 'utf8').split('\n')[0]);
    const chatPaths = [`/chat/rooms/${roomId}/messages?before=1000&limit=50`, '/chat/rooms'];
    const rows: Array<Array<string | number>> = [];
    for (const [label, app] of [
      ['primary only', primaryOnly],
      ['one replica', withReplica],
    ] as const) {
      for (const url of chatPaths) {
        await load(app, user, url);
        const cpu0 = [serverCpuSeconds(pmPid('primary')), serverCpuSeconds(pmPid('replica'))];
        const r = await load(app, user, url);
        const cpu1 = [serverCpuSeconds(pmPid('primary')), serverCpuSeconds(pmPid('replica'))];
        rows.push([
          label,
          url.replace(roomId, ':id'),
          r.rps,
          r.p99,
          Math.round(((cpu1[0] ?? 0) - (cpu0[0] ?? 0)) * 10) / 10,
          Math.round(((cpu1[1] ?? 0) - (cpu0[1] ?? 0)) * 10) / 10,
        ]);
      }
    }
    table(
      `chat reads on a replica (${CHAT_ROOMS} rooms × ${CHAT_MESSAGES_PER_ROOM.toLocaleString('en')} messages, all unread)`,
      ['reads', 'path', 'req/s', 'p99 ms', 'primary CPU s', 'replica CPU s'],
      rows,
    );
    // What a chat change adds with replicas on (chat/reads.ts): the primary's WAL position, then one store script
    // per key (the author's and the room's), before the broadcast. Sequential, then 20 at once (they share the
    // position query).
    const positions = createReadPositions({
      store: withReplica.ctx.store,
      reads: withReplica.ctx.database.reads,
      namespace: 'bench',
      maxLagMs: 2_000,
      logger: withReplica.log,
    });
    const n = 1_000;
    const t = performance.now();
    for (let i = 0; i < n; i++) await positions.record([`u:${user.id}`, `r:${roomId}`]);
    const recordUs = ((performance.now() - t) / n) * 1000;
    const t2 = performance.now();
    for (let i = 0; i < n / 20; i++) {
      await Promise.all(
        Array.from({ length: 20 }, (_, k) => positions.record([`u:${user.id}${k}`, `r:${roomId}`])),
      );
    }
    const batchUs = ((performance.now() - t2) / (n / 20)) * 1000;
    const t3 = performance.now();
    for (let i = 0; i < n; i++) await positions.of([`u:${user.id}`, `r:${roomId}`]);
    const ofUs = ((performance.now() - t3) / n) * 1000;
    positions.close();
    table(
      'chat read-your-writes cost',
      ['part', 'µs'],
      [
        ['per change: WAL position + 2 store scripts (sequential)', Math.round(recordUs)],
        ['20 concurrent changes (one shared WAL position query), whole batch', Math.round(batchUs)],
        ['per read: store MGET of 2 positions', Math.round(ofUs)],
      ],
    );
  } finally {
    await env.close();
    await pair.close();
  }
}

async function poolBench(): Promise<void> {
  const env = await createTestEnv({ DATABASE_STATEMENT_TIMEOUT_MS: '0' });
  const bouncer = await startPgBouncer({ poolSize: 10 });
  try {
    const rows: Array<Array<string | number>> = [];
    for (const [label, extra] of [
      ['direct', {}],
      [
        'PgBouncer (default_pool_size 10)',
        { DATABASE_URL: bouncer.urlFor(env.db.url), DATABASE_DIRECT_URL: env.db.url },
      ],
    ] as const) {
      const apps = [await env.app(extra), await env.app(extra), await env.app(extra)];
      const user = await createVerifiedUser(apps[0] as App, env.smtp);
      let peak = 0;
      const admin = new pg.Client({ connectionString: env.db.url.replace(/\/[^/]+$/, '/test') });
      await admin.connect();
      let running = true;
      const sampler = (async () => {
        while (running) {
          const { rows: r } = await admin.query<{ n: number }>(
            `select count(*)::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`,
            [env.db.name],
          );
          peak = Math.max(peak, r[0]?.n ?? 0);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      const results = await Promise.all(apps.map((a) => load(a, user, '/notification/list?page=2&limit=20')));
      running = false;
      await sampler;
      await admin.end();
      rows.push([label, 3 * 10, peak, results.reduce((s, r) => s + r.rps, 0)]);
      await Promise.all(apps.map((a) => a.close()));
      env.apps.length = 0;
    }
    table(
      'server connections, 3 instances × pool 10, 20 requests in flight each',
      ['path', 'client pool slots', 'peak server connections', 'req/s (sum)'],
      rows,
    );
  } finally {
    await bouncer.close();
    await env.close();
  }
}

async function main() {
  const load1 = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`load average at start: ${load1}`);
  if (!ONLY || ONLY === 'index') await indexBench();
  if (!ONLY || ONLY === 'replica') await replicaBench();
  if (!ONLY || ONLY === 'chat') await chatReplicaBench();
  if (!ONLY || ONLY === 'pool') await poolBench();
  console.log(
    `load average at end: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
