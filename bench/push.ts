// Web Push throughput, in one process: a Herald app (buildApp, real PostgreSQL) and a local push service
// (node:http answering 201 without decrypting, so the figures are Herald's side: encryption, VAPID, HTTP).
//  1. enqueue: a broadcast (the admin broadcast code path, admin/broadcast.ts) to --users users, each with one
//     browser subscribed, with push on for every user against the same broadcast with push off (no push rows):
//     runs alternate, --runs of each, with the push worker stopped so only the enqueue is measured;
//  2. drain: the worker started with PUSH_CONCURRENCY (default 64) on the last run's --users messages;
//     sends/s from start to an empty queue.
// Usage: npm run bench -- push [--users 100000] [--runs 2] [--concurrency 64]
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { createTestDatabase, TEST_AUTH_SECRET, TEST_REDIS_URL } from '@herald/server/testkit';
import { sql } from 'drizzle-orm';
import { broadcast } from '../server/src/admin/broadcast.js';
import { buildApp } from '../server/src/app.js';
import { generateVapidKeys, loadConfig } from '../server/src/config.js';
import { rowsOf } from '../server/src/infra/db.js';
import { numberArg } from './_lib.js';

const users = numberArg('users', 100_000);
const runs = numberArg('runs', 2);
const concurrency = numberArg('concurrency', 64);

async function main() {
  let received = 0;
  const service = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.writeHead(201).end();
    });
  });
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  const vapid = generateVapidKeys();
  const db = await createTestDatabase();
  const app = await buildApp(
    loadConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATABASE_URL: db.url,
      CACHE_URL: TEST_REDIS_URL,
      CACHE_KEY_PREFIX: `bench-push-${Date.now()}:`,
      AUTH_SECRET: TEST_AUTH_SECRET,
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:bench@example.com',
      PUSH_ALLOW_PRIVATE_ENDPOINTS: 'true',
      PUSH_CONCURRENCY: String(concurrency),
      PUSH_CONCURRENCY_PER_SERVICE: String(concurrency),
      PUSH_QUEUE_POLL_MS: '200',
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      // Seeding 100,000 rows on a loaded machine can take longer than the default 10 s.
      DATABASE_STATEMENT_TIMEOUT_MS: '0',
    }),
  );
  const { database, config } = app.ctx;
  const worker = app.ctx.push.worker;
  if (!worker) throw new Error('push is off');
  try {
    const d = database.db;
    // A browser's keys (one pair for every subscription: the cost per message is the same).
    const ecdh = (await import('node:crypto')).createECDH('prime256v1');
    ecdh.generateKeys();
    const p256dh = ecdh.getPublicKey().toString('base64url');
    const auth = (await import('node:crypto')).randomBytes(16).toString('base64url');
    // Unverified users: no notification emails compete with the measurement.
    await d.execute(sql`
      insert into "user" (id, name, email, email_verified, created_at, updated_at)
      select 'pb-' || g, 'User ' || g, 'pb-' || g || '@example.test', false, now(), now()
      from generate_series(1, ${users}::int) g`);
    await d.execute(sql`
      insert into push_subscription (user_id, endpoint, push_service, p256dh, auth)
      select 'pb-' || g, ${`${origin}/push/`} || g, ${origin}, ${p256dh}, ${auth}
      from generate_series(1, ${users}::int) g`);
    await d.execute(sql`
      insert into notification_preference (user_id, push_enabled)
      select 'pb-' || g, false from generate_series(1, ${users}::int) g`);
    await d.execute(sql`analyze`);
    await worker.stop();

    const send = async (pushOn: boolean, i: number) => {
      await d.execute(sql`update notification_preference set push_enabled = ${pushOn}`);
      const before = Number(
        rowsOf<{ n: number }>(await d.execute(sql`select count(*)::int as n from push_delivery`))[0]?.n,
      );
      const t0 = performance.now();
      const result = await broadcast(
        { db: d, service: app.notifications, batchSize: config.BROADCAST_BATCH_SIZE },
        {
          target: { scope: 'all' },
          notification: { type: 'message', title: `bench ${i}`, content: 'push bench' },
        },
      );
      const ms = performance.now() - t0;
      const after = Number(
        rowsOf<{ n: number }>(await d.execute(sql`select count(*)::int as n from push_delivery`))[0]?.n,
      );
      return {
        push: pushOn ? 'on' : 'off',
        users: result.createdCount,
        ms: Math.round(ms),
        queued: after - before,
      };
    };

    const rows: Array<Record<string, unknown>> = [];
    let lastRunFrom = 0;
    for (let i = 0; i < runs; i++) {
      rows.push(await send(false, i));
      lastRunFrom = Number(
        rowsOf<{ n: number }>(
          await d.execute(sql`select coalesce(max(id), 0)::bigint as n from push_delivery`),
        )[0]?.n,
      );
      rows.push(await send(true, i));
    }
    console.log(`\nbroadcast to ${users} users, push worker stopped (enqueue only)`);
    console.table(rows);
    const mean = (on: boolean) => {
      const xs = rows.filter((r) => r.push === (on ? 'on' : 'off')).map((r) => Number(r.ms));
      return xs.reduce((a, b) => a + b, 0) / xs.length;
    };
    console.log(
      `mean off ${Math.round(mean(false))} ms, on ${Math.round(mean(true))} ms: push adds ${(((mean(true) - mean(false)) / mean(false)) * 100).toFixed(1)} %`,
    );

    // Drain only the last run's messages.
    await d.execute(sql`
      update push_delivery set status = 'cancelled'
      where status = 'pending' and id <= ${lastRunFrom}`);
    const pending = (await worker.stats()).pending;
    received = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    worker.start();
    for (;;) {
      await new Promise((r) => setTimeout(r, 200));
      if ((await worker.stats()).pending === 0) break;
    }
    const drainMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    console.log(`\ndrain with PUSH_CONCURRENCY=${concurrency} (one push service answering 201)`);
    console.table([
      {
        messages: pending,
        requests: received,
        seconds: (drainMs / 1000).toFixed(1),
        'sends/s': Math.round(received / (drainMs / 1000)),
        // This process's CPU (Herald and the trivial push service) per message: comparable across machine loads.
        'cpu ms/message': ((cpu.user + cpu.system) / 1000 / Math.max(1, received)).toFixed(2),
      },
    ]);
    console.log(
      `os.loadavg(): ${os
        .loadavg()
        .map((v) => v.toFixed(2))
        .join(' ')} (${os.cpus().length} cores)`,
    );
  } finally {
    await app.close();
    service.closeAllConnections();
    service.close();
    await db.drop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
