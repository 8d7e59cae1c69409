// Email digests at scale (docs/performance.md, "Email digests"): --users users with --per-user unread
// notifications each, all in one hourly window that has ended.
//  1. schedule: the digest rows as broadcasts create them (batches of 500 recipients, one statement each);
//  2. compose: the digest worker claims, lists, renders and queues every digest into the outbox (SMTP idle);
//  3. send: the outbox drains to a local SMTP sink (smtp-server in this process, discarding bodies).
// One in-process app on the real PostgreSQL (a fresh database) and Redis.
// Usage: npm run bench -- email-digest [--users 100000] [--per-user 5] [--send 100000]

import { createTestDatabase, TEST_AUTH_SECRET, TEST_REDIS_URL } from '@herald/server/testkit';
import { sql } from 'drizzle-orm';
import { SMTPServer } from 'smtp-server';
import { buildApp } from '../server/src/app.js';
import { loadConfig } from '../server/src/config.js';
import { rowsOf } from '../server/src/infra/db.js';
import type { EmailRecipient } from '../server/src/notifications/repository.js';
import { numberArg } from './_lib.js';

const users = numberArg('users', 100_000);
const perUser = numberArg('per-user', 5);
const sendLimit = numberArg('send', users);
const BATCH = 500;
const HOUR = 3_600_000;

async function main() {
  let received = 0;
  const sink = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      stream.resume();
      stream.on('end', () => {
        received++;
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const smtpPort = (sink.server.address() as { port: number }).port;
  const db = await createTestDatabase();
  const app = await buildApp(
    loadConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATABASE_URL: db.url,
      CACHE_URL: TEST_REDIS_URL,
      CACHE_KEY_PREFIX: `bench-digest-${Date.now()}:`,
      AUTH_SECRET: TEST_AUTH_SECRET,
      API_BASE_URL: 'http://localhost:3001',
      FE_BASE_URL: 'http://localhost:3000',
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: String(smtpPort),
      APP_NAME: 'Acme',
      EMAIL_QUEUE_POLL_MS: '50',
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      // Seeding half a million rows in one statement outlasts the default 10 s.
      DATABASE_STATEMENT_TIMEOUT_MS: '0',
    }),
  );
  const { outbox, email, database } = app.ctx;
  // Phases are measured one at a time: the background loops wait until asked.
  await email.digests.stop();
  await outbox.stop();
  try {
    const t0 = performance.now();
    await database.db.execute(sql`
      insert into "user" (id, name, email, email_verified, locale, created_at, updated_at)
      select 'dg-' || g, 'User ' || g, 'dg-' || g || '@example.test', true,
             case when g % 4 = 0 then 'de' else null end, now(), now()
      from generate_series(1, ${users}::int) g`);
    await database.db.execute(sql`
      insert into notification_preference (user_id, email_digest)
      select 'dg-' || g, 'hourly' from generate_series(1, ${users}::int) g`);
    // The previous full hour: a window that has ended, so every digest is due at once.
    const windowStart = Math.floor(Date.now() / HOUR) * HOUR - HOUR;
    await database.db.execute(sql`
      insert into notification (user_id, type, title, content, created_at, updated_at)
      select 'dg-' || g, 'mention', 'Notification ' || k || ' for user ' || g,
             'Someone mentioned you in a conversation (' || k || ').',
             timestamptz 'epoch' + (${windowStart}::bigint + k * 60000) * interval '1 millisecond', now()
      from generate_series(1, ${users}::int) g, generate_series(1, ${perUser}::int) k`);
    const seedS = (performance.now() - t0) / 1000;

    // 1. schedule, as the email strategy does for each batch of a broadcast (one statement per batch).
    const t1 = performance.now();
    let statements = 0;
    for (let k = 1; k <= perUser; k++) {
      for (let from = 1; from <= users; from += BATCH) {
        const batch: EmailRecipient[] = [];
        for (let g = from; g < Math.min(from + BATCH, users + 1); g++) {
          batch.push({
            userId: `dg-${g}`,
            notificationId: '',
            email: `dg-${g}@example.test`,
            locale: null,
            digest: 'hourly',
            createdAtMs: windowStart + k * 60_000,
          });
        }
        await email.digests.schedule(batch);
        statements++;
      }
    }
    const scheduleS = (performance.now() - t1) / 1000;
    const [rowCount] = rowsOf<{ n: number }>(
      await database.db.execute(sql`select count(*)::int as n from email_digest`),
    );

    // 2. compose and enqueue every digest.
    const t2 = performance.now();
    const processed = await email.digests.drain();
    const composeS = (performance.now() - t2) / 1000;
    const [queued] = rowsOf<{ n: number; bytes: number }>(
      await database.db.execute(
        sql`select count(*)::int as n, avg(length(html_body) + length(text_body))::int as bytes
            from email_outbox where dedupe_key like 'digest:%'`,
      ),
    );

    // 3. send through the outbox to the SMTP sink (the first --send emails' worth of time).
    const target = Math.min(sendLimit, queued?.n ?? 0);
    const t3 = performance.now();
    outbox.start();
    while (received < target) await new Promise((r) => setTimeout(r, 100));
    const sendS = (performance.now() - t3) / 1000;

    const rows: Array<[string, string]> = [
      ['users × notifications', `${users} × ${perUser} (seeded in ${seedS.toFixed(1)} s)`],
      ['schedule: statements / rows', `${statements} / ${rowCount?.n}`],
      [
        'schedule: time',
        `${scheduleS.toFixed(2)} s (${Math.round((users * perUser) / scheduleS)} entries/s)`,
      ],
      ['compose + enqueue: digests', `${processed} in ${composeS.toFixed(2)} s`],
      ['compose + enqueue: rate', `${Math.round(processed / composeS)} digests/s`],
      ['digest size (html + text)', `${queued?.bytes} bytes`],
      ['outbox → SMTP: emails', `${received} in ${sendS.toFixed(2)} s`],
      ['outbox → SMTP: rate', `${Math.round(received / sendS)} emails/s`],
    ];
    console.log('| measure | value |\n|---|---|');
    for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  } finally {
    await app.close();
    await new Promise<void>((resolve) => sink.close(() => resolve()));
    await db.drop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
