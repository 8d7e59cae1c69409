// Admin broadcast to every user: seeds N users (default 10,000) with one multi-row insert, then times
// POST /admin/notifications/send { scope: "all" } over loopback HTTP against a real app (PostgreSQL + Redis).
// Two variants: default delivery (sse → email: offline users get an email queued in the outbox) and sse only.
// `--breakdown` runs the server at debug level and sums its per-batch timing lines (insert, unread cache,
// bus publish, each delivery strategy) so the table says where the time goes.
// Usage: npx tsx bench/broadcast.ts [--users 10000] [--runs 3] [--breakdown] [--only default|sse] [--batch-size 500]
//        [--drain-outbox] [--write-concurrency N]
//        (or: npm run bench -- broadcast …)

import { createAdmin, createTestEnv, jsonHeaders } from '@herald/server/testkit';
import { sql } from 'drizzle-orm';
import type { Mailer } from '../server/src/infra/mailer.js';
import { flagArg, machineLoad, numberArg, printTable, stringArg } from './_lib.js';

const USERS = numberArg('users', 10_000);
const RUNS = numberArg('runs', 3);
const BREAKDOWN = flagArg('breakdown');
const ONLY = stringArg('only', '');
// BROADCAST_BATCH_SIZE of the measured instance (the service's default when not given).
const BATCH_SIZE = stringArg('batch-size', '');
// BROADCAST_WRITE_CONCURRENCY of the measured instance (batch statements in flight; the default when not given).
const WRITE_CONCURRENCY = stringArg('write-concurrency', '');
// Let the outbox worker send (with a mailer that does nothing) the emails the broadcast queues, during the request.
const DRAIN_OUTBOX = flagArg('drain-outbox');

/** Per-batch timings the service logs at debug level ('notification batch created'). */
interface BatchLine {
  msg?: string;
  users?: number;
  insertMs?: number;
  unreadCacheMs?: number;
  publishMs?: number;
  deliveryMs?: Record<string, number>;
}

/**
 * Each enqueue kicks the outbox worker. With a mailer that returns at once, the worker would mark the queued emails
 * sent one UPDATE at a time, at CPU speed, during the request: an SMTP server's pace would never allow that. Its
 * sends are held until the measurement is over, so the worker claims one round of rows and waits (what a slow
 * SMTP server looks like); `--drain-outbox` gives the old behaviour.
 */
function heldMailer(): Mailer & { release(): void } {
  const waiting: Array<() => void> = [];
  let released = false;
  return {
    enabled: true,
    send: () => (released ? Promise.resolve() : new Promise<void>((resolve) => waiting.push(resolve))),
    verify: async () => {},
    close: () => {},
    release() {
      released = true;
      for (const resolve of waiting.splice(0)) resolve();
    },
  };
}

async function main() {
  const env = await createTestEnv({ LOG_LEVEL: 'silent' });
  const mailer = heldMailer();
  const sums = new Map<string, number>();
  let batches = 0;
  const add = (k: string, v: number | undefined) => sums.set(k, (sums.get(k) ?? 0) + (v ?? 0));
  const logStream = {
    write(line: string) {
      if (!line.includes('notification batch created')) return;
      const l = JSON.parse(line) as BatchLine;
      batches++;
      add('insert (notifications + cursors + event log)', l.insertMs);
      add('unread cache invalidation', l.unreadCacheMs);
      add('bus publish', l.publishMs);
      for (const [name, ms] of Object.entries(l.deliveryMs ?? {})) add(`delivery: ${name}`, ms);
    },
  };
  try {
    // Admin signs up through the real endpoints (needs the SMTP capture); the measured instance holds its outbox's
    // sends (heldMailer) so queued emails are not sent during the measurement (the outbox insert is still part of
    // the request).
    const setup = await env.app();
    const admin = await createAdmin(setup, env.smtp);
    const app = await env.app(
      {
        SMTP_HOST: '',
        EMAIL_QUEUE_POLL_MS: '3600000',
        // This bench times the synchronous send (200 once every batch is done); above the threshold the same send
        // answers 202 and runs in the background, which `broadcast-async` measures.
        BROADCAST_ASYNC_THRESHOLD: '100000000',
        ...(WRITE_CONCURRENCY ? { BROADCAST_WRITE_CONCURRENCY: WRITE_CONCURRENCY } : {}),
        ...(BREAKDOWN ? { LOG_LEVEL: 'debug' } : {}),
        ...(BATCH_SIZE ? { BROADCAST_BATCH_SIZE: BATCH_SIZE } : {}),
      },
      {
        ...(BREAKDOWN ? { logStream } : {}),
        ...(DRAIN_OUTBOX ? {} : { overrides: { mailer } }),
      },
    );
    await setup.close();
    const t0 = performance.now();
    await app.ctx.database.db.execute(sql`
      insert into "user" (id, name, email, email_verified, created_at, updated_at)
      select 'bench-' || lpad(g::text, 7, '0'), 'Bench ' || g, 'bench' || g || '@example.test', true, now(), now()
      from generate_series(1, ${USERS}::int) g`);
    await app.ctx.database.db.execute(sql`analyze "user"`);
    const seedMs = performance.now() - t0;
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const rows: Array<Record<string, string | number>> = [];
    const variants = ([undefined, ['sse']] as const).filter(
      (s) => !ONLY || (ONLY === 'sse' ? s !== undefined : s === undefined),
    );
    for (const strategies of variants) {
      for (let run = 1; run <= RUNS; run++) {
        sums.clear();
        batches = 0;
        const loadBefore = machineLoad();
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
          'load before → after': `${loadBefore} → ${machineLoad()}`,
        });
        if (BREAKDOWN) {
          const parts = [...sums].map(([part, total]) => ({
            part,
            'total ms': Math.round(total),
            'per batch ms': (total / Math.max(1, batches)).toFixed(1),
            'share of request': `${((total / ms) * 100).toFixed(0)} %`,
          }));
          console.log(`\nrun ${run} (${rows.at(-1)?.delivery}): ${batches} batches, ${Math.round(ms)} ms`);
          console.table(parts);
        }
      }
    }
    console.log(
      `\nusers seeded: ${USERS} in ${Math.round(seedMs)} ms; batch size ${app.ctx.config.BROADCAST_BATCH_SIZE}, ${app.ctx.config.BROADCAST_WRITE_CONCURRENCY} statements in flight; ` +
        `machine: ${machineLoad()}`,
    );
    printTable(rows);
  } finally {
    mailer.release();
    await env.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
