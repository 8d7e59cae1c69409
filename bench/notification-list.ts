// GET /notification/list (and friends) with 1,000 notifications per user: a real app on PostgreSQL + Redis,
// a user signed up through the real endpoints, 1,000 rows for them plus 50 other users × 1,000 rows so the
// table is not trivially small. Each path runs sequentially (latency) and with 20 requests in flight
// (throughput), over loopback HTTP. Usage: npx tsx bench/notification-list.ts [--requests 300] [--concurrency 20]
// [--explain] (prints EXPLAIN ANALYZE of the list statement, page 1 and page 40, first) [--vacuum] (VACUUM the
// table after seeding, as autovacuum would in steady state: the visibility map then allows index-only counts)

import { createTestEnv, createVerifiedUser } from '@herald/server/testkit';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../server/src/infra/db.js';
import { NOTIFICATION_TYPES } from '../server/src/notifications/schemas.js';
import { flagArg, numberArg, printTable } from './_lib.js';

const REQUESTS = numberArg('requests', 300);
const CONCURRENCY = numberArg('concurrency', 20);
const PER_USER = 1_000;
const OTHER_USERS = 50;

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
const r1 = (n: number) => Math.round(n * 10) / 10;

async function main() {
  // No statement timeout: seeding 51,000 rows (trigram indexes included) can take longer on a busy machine.
  const env = await createTestEnv({ LOG_LEVEL: 'silent', DATABASE_STATEMENT_TIMEOUT_MS: '0' });
  try {
    const app = await env.app();
    const u = await createVerifiedUser(app, env.smtp);
    const types = NOTIFICATION_TYPES;
    const typeArr = `{${types.join(',')}}`;
    await app.ctx.database.db.execute(sql`
      insert into "user" (id, name, email, email_verified, created_at, updated_at)
      select 'other-' || g, 'Other ' || g, 'other' || g || '@example.test', true, now(), now()
      from generate_series(1, ${OTHER_USERS}::int) g`);
    await app.ctx.database.db.execute(sql`
      insert into notification (user_id, type, title, content, read, created_at, updated_at)
      select uid, (${typeArr}::text[])[1 + (g % 8)], 'Notification ' || g || ' about order #' || (g * 7919 % 100000),
             'Body of notification ' || g || ' with some longer content that a user might read: ' || md5(g::text),
             g % 3 = 0, now() - (g || ' minutes')::interval, now() - (g || ' minutes')::interval
      from (select ${u.id}::text as uid union all select 'other-' || x from generate_series(1, ${OTHER_USERS}::int) x) users
      cross join generate_series(1, ${PER_USER}::int) g`);
    await app.ctx.database.db.execute(
      flagArg('vacuum') ? sql`vacuum analyze notification` : sql`analyze notification`,
    );
    if (flagArg('explain')) {
      for (const offset of [0, 780]) {
        // The statement repository.list runs (page and count in one), for the measured user.
        const plan = await app.ctx.database.db.execute(sql`
          explain (analyze, buffers, costs off)
          select c.total, p.* from (select count(*)::int as total from notification where user_id = ${u.id}) c
          left join lateral (
            select id, user_id, type, title, content, metadata, read, created_at, updated_at from notification
            where user_id = ${u.id} order by created_at desc, id desc limit 20 offset ${offset}
          ) p on true
          order by p.created_at desc, p.id desc`);
        console.log(`\nEXPLAIN ANALYZE list, limit 20 offset ${offset}:`);
        for (const row of rowsOf<Record<string, string>>(plan)) console.log(Object.values(row)[0]);
      }
    }
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const headers = { cookie: u.cookie };
    const paths: Array<[string, string]> = [
      ['list page 1 (limit 20)', '/notification/list'],
      ['list page 40 (limit 20)', '/notification/list?page=40'],
      ['list limit 100', '/notification/list?limit=100'],
      ['list filter=unread', '/notification/list?filter=unread'],
      ['list type=mention', '/notification/list?type=mention'],
      ['list search (trigram)', '/notification/list?search=order%20%2342'],
      ['counts (cached)', '/notification/counts'],
      ['unread-count (cached)', '/notification/unread-count'],
    ];
    const hit = async (path: string) => {
      const t = performance.now();
      const res = await fetch(url + path, { headers });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
      return performance.now() - t;
    };
    const rows = [];
    for (const [name, path] of paths) {
      for (let i = 0; i < 20; i++) await hit(path); // warm-up
      const seq: number[] = [];
      for (let i = 0; i < REQUESTS; i++) seq.push(await hit(path));
      seq.sort((a, b) => a - b);
      const conc: number[] = [];
      let next = 0;
      const start = performance.now();
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next++ < REQUESTS) conc.push(await hit(path));
        }),
      );
      const elapsed = performance.now() - start;
      conc.sort((a, b) => a - b);
      rows.push({
        path: name,
        'seq p50 ms': r1(pct(seq, 50)),
        'seq p95 ms': r1(pct(seq, 95)),
        'seq p99 ms': r1(pct(seq, 99)),
        [`c${CONCURRENCY} req/s`]: Math.round((conc.length / elapsed) * 1000),
        [`c${CONCURRENCY} p99 ms`]: r1(pct(conc, 99)),
      });
    }
    console.log(
      `${PER_USER} notifications for the measured user, ${OTHER_USERS * PER_USER} for ${OTHER_USERS} others; ${REQUESTS} requests per mode`,
    );
    printTable(rows);
  } finally {
    await env.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
