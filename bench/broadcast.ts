// Admin broadcast to every user: seeds N users (default 10,000) with one multi-row insert, then times
// POST /admin/notifications/send { scope: "all" } over loopback HTTP against a real app (PostgreSQL + Redis).
// Two variants: default delivery (sse → email: offline users get an email queued in the outbox) and sse only.
// Usage: npx tsx bench/broadcast.ts [--users 10000] [--runs 3]   (or: npm run bench -- broadcast)
import { sql } from 'drizzle-orm';
import { createTestEnv } from '../server/test/helpers/app.js';
import { createAdmin, jsonHeaders } from '../server/test/helpers/users.js';
import { numberArg, printTable } from './_lib.js';

const USERS = numberArg('users', 10_000);
const RUNS = numberArg('runs', 3);

async function main() {
  const env = await createTestEnv({ LOG_LEVEL: 'silent' });
  try {
    // Admin signs up through the real endpoints (needs the SMTP capture); the measured instance has no SMTP so
    // queued emails are not sent during the measurement (the outbox insert is still part of the request).
    const setup = await env.app();
    const admin = await createAdmin(setup, env.smtp);
    const app = await env.app({ SMTP_HOST: '', EMAIL_QUEUE_POLL_MS: '3600000' });
    await setup.close();
    const t0 = performance.now();
    await app.ctx.database.db.execute(sql`
      insert into "user" (id, name, email, email_verified, created_at, updated_at)
      select 'bench-' || lpad(g::text, 6, '0'), 'Bench ' || g, 'bench' || g || '@example.test', true, now(), now()
      from generate_series(1, ${USERS}::int) g`);
    const seedMs = performance.now() - t0;
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const rows: Array<Record<string, string | number>> = [];
    for (const strategies of [undefined, ['sse']] as const) {
      for (let run = 1; run <= RUNS; run++) {
        const start = performance.now();
        const res = await fetch(`${url}/admin/notifications/send`, {
          method: 'POST',
          headers: jsonHeaders(admin.cookie),
          body: JSON.stringify({
            target: { scope: 'all' },
            notification: {
              type: 'announcement',
              title: `Benchmark broadcast ${run}`,
              content: 'Scheduled maintenance tonight at 22:00 UTC.',
              ...(strategies ? { deliveryOptions: { strategies } } : {}),
            },
          }),
        });
        const ms = performance.now() - start;
        const body = (await res.json()) as { targetCount: number; createdCount: number };
        if (res.status !== 200) throw new Error(`broadcast failed: ${res.status} ${JSON.stringify(body)}`);
        rows.push({
          delivery: strategies ? strategies.join(',') : 'default (sse,email,push)',
          run,
          targetCount: body.targetCount,
          createdCount: body.createdCount,
          'total ms': Math.round(ms),
          'per 1k users ms': Math.round((ms / body.targetCount) * 1000),
        });
      }
    }
    console.log(
      `users seeded: ${USERS} in ${Math.round(seedMs)} ms; batch size ${app.ctx.config.BROADCAST_BATCH_SIZE}`,
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
