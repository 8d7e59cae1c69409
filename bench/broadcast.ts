// Admin broadcast to every user: seeds N users (default 10,000) with one multi-row insert, then times
// POST /admin/notifications/send { scope: "all" } over loopback HTTP against a real app (PostgreSQL + Redis).
// Two variants: default delivery (sse → email: offline users get an email queued in the outbox) and sse only.
// `--breakdown` runs the server at debug level and sums its per-batch timing lines (insert, unread cache,
// bus publish, each delivery strategy) so the table says where the time goes.
// The outbox worker runs as in production (default poll, pooled SMTP) and sends the queued emails to a counting SMTP
// server in a process of its own while the broadcast runs (issue 27: no held workers); `--outbox held` holds its
// sends until the measurement is over (the figure published before 2026-11-28), `--outbox instant` drops each email
// at once (no SMTP_HOST: the worker marks them sent at CPU speed). Every run starts from an empty outbox.
// Usage: npx tsx bench/broadcast.ts [--users 10000] [--runs 3] [--breakdown] [--only default|sse] [--batch-size 500]
//        [--outbox smtp|held|instant] [--write-concurrency N]
//        (or: npm run bench -- broadcast …)

import { createAdmin, createTestEnv, jsonHeaders } from '@herald/server/testkit';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../server/src/infra/db.js';
import type { Mailer } from '../server/src/infra/mailer.js';
import { cpuSecondsOfProcesses, flagArg, machineLoad, numberArg, printTable, stringArg } from './_lib.js';
import { startSmtpSinkProcess } from './_smtp-sink.js';

const USERS = numberArg('users', 10_000);
const RUNS = numberArg('runs', 3);
const BREAKDOWN = flagArg('breakdown');
const ONLY = stringArg('only', '');
// BROADCAST_BATCH_SIZE of the measured instance (the service's default when not given).
const BATCH_SIZE = stringArg('batch-size', '');
// BROADCAST_WRITE_CONCURRENCY of the measured instance (batch statements in flight; the default when not given).
const WRITE_CONCURRENCY = stringArg('write-concurrency', '');
const OUTBOX = stringArg('outbox', 'smtp');
if (!['smtp', 'held', 'instant'].includes(OUTBOX)) throw new Error('--outbox takes smtp, held or instant');

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
 * `--outbox held`: the worker claims one round of rows and waits until the measurement is over (what a stalled SMTP
 * server looks like). Not how production runs; kept to compare with the figures measured that way.
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

type BenchApp = Awaited<ReturnType<Awaited<ReturnType<typeof createTestEnv>>['app']>>;

/** What the queued emails take on disk (table, TOAST and indexes): PostgreSQL compresses each rendered body. */
async function outboxBytes(app: BenchApp): Promise<Record<string, number | string>> {
  const [row] = rowsOf<{ bytes: string; n: string }>(
    await app.ctx.database.db.execute(
      sql`select pg_total_relation_size('email_outbox') as bytes, (select count(*) from email_outbox) as n`,
    ),
  );
  const n = Number(row?.n ?? 0);
  return {
    'emails queued': n,
    'outbox bytes per email': n > 0 ? Math.round(Number(row?.bytes ?? 0) / n) : '-',
  };
}

async function main() {
  const env = await createTestEnv({ LOG_LEVEL: 'silent' });
  const mailer = heldMailer();
  const sink = OUTBOX === 'smtp' ? await startSmtpSinkProcess() : undefined;
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
    // Admin signs up through the real endpoints (needs the SMTP capture); the measured instance sends its outbox to
    // the sink process (or holds / drops the sends, --outbox).
    const setup = await env.app();
    const admin = await createAdmin(setup, env.smtp);
    const app = await env.app(
      {
        SMTP_HOST: sink ? '127.0.0.1' : '',
        ...(sink ? { SMTP_PORT: String(sink.port) } : {}),
        ...(OUTBOX === 'held' ? { EMAIL_QUEUE_POLL_MS: '3600000' } : {}),
        // This bench times the synchronous send (200 once every batch is done); above the threshold the same send
        // answers 202 and runs in the background, which `broadcast-async` measures.
        BROADCAST_ASYNC_THRESHOLD: '100000000',
        ...(WRITE_CONCURRENCY ? { BROADCAST_WRITE_CONCURRENCY: WRITE_CONCURRENCY } : {}),
        ...(BREAKDOWN ? { LOG_LEVEL: 'debug' } : {}),
        ...(BATCH_SIZE ? { BROADCAST_BATCH_SIZE: BATCH_SIZE } : {}),
      },
      {
        ...(BREAKDOWN ? { logStream } : {}),
        ...(OUTBOX === 'held' ? { overrides: { mailer } } : {}),
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
        // Each run starts from an empty outbox: the previous run's unsent emails are dropped, not waited for.
        await app.ctx.database.db.execute(sql`truncate email_outbox`);
        const sentBefore = (await sink?.received()) ?? 0;
        const loadBefore = machineLoad();
        // CPU seconds, which other jobs on the machine hardly move (unlike the wall time): Herald runs in this
        // process (the one request the bench sends is negligible next to it), PostgreSQL in its backends.
        const herald0 = process.cpuUsage();
        const pg0 = cpuSecondsOfProcesses('postgres');
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
        const heraldCpu = process.cpuUsage(herald0);
        const pgCpuS = cpuSecondsOfProcesses('postgres') - pg0;
        const body = (await res.json()) as { targetCount: number; createdCount: number };
        if (res.status !== 200) throw new Error(`broadcast failed: ${res.status} ${JSON.stringify(body)}`);
        rows.push({
          delivery: strategies ? strategies.join(',') : 'default (sse,email,push)',
          run,
          targetCount: body.targetCount,
          createdCount: body.createdCount,
          'total ms': Math.round(ms),
          'per 1k users ms': Math.round((ms / body.targetCount) * 1000),
          'CPU per 1k users ms, Herald / PostgreSQL': `${Math.round(((heraldCpu.user + heraldCpu.system) / body.targetCount) * 1)} / ${Math.round((pgCpuS / body.targetCount) * 1e6)}`,
          ...(sink ? { 'emails at SMTP during the request': (await sink.received()) - sentBefore } : {}),
          ...(await outboxBytes(app)),
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
      `\noutbox: ${OUTBOX}; users seeded: ${USERS} in ${Math.round(seedMs)} ms; batch size ${app.ctx.config.BROADCAST_BATCH_SIZE}, ${app.ctx.config.BROADCAST_WRITE_CONCURRENCY} statements in flight; ` +
        `machine: ${machineLoad()}`,
    );
    printTable(rows);
  } finally {
    mailer.release();
    await env.close();
    sink?.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
