// Outbox drain (issue 27 target 6): --emails ready notification emails (default 100,000) are put in email_outbox
// with one SQL insert, while --instances real server processes (default 2; NODE_ENV=production, PostgreSQL, a
// private redis-server) are already running; their outbox workers drain them as production does (no held
// workers, default EMAIL_QUEUE_POLL_MS, the default claim of 20 rows a round). Two mailers:
//   smtp    — nodemailer's pooled SMTP (5 connections per instance) to a sink in this process that counts and
//             discards each message (startSmtpSink in the testkit);
//   instant — no SMTP_HOST: the production mailer then drops every email at once (its per-email warning is
//             silenced with LOG_LEVEL=error), so the figure is the outbox's own ceiling (claim, settle, database).
// Reported: emails/s (wall time from the insert's commit, and first → last sent), and settle statements per
// email counted from the data itself: the settle UPDATE sets sent_at = now(), which is the start of its
// transaction, so the number of distinct sent_at values is the number of settling transactions that ran (each
// is one UPDATE for all the sent rows of a round; a per-email settle would show one value per email).
// Usage: npm run bench -- outbox-drain [--emails 100000] [--instances 2] [--mailer smtp|instant|both] [--runs 1]
//        [--index new|old|both] [--timeout-s 1800]
import { startCluster, startSmtpSink } from '@herald/server/testkit';
import pg from 'pg';
import { createEmailRenderer } from '../server/src/email/renderer.js';
import {
  cpuSecondsOfPort,
  machineLoad,
  numberArg,
  PRODUCTION_LIVENESS,
  printTable,
  stringArg,
} from './_lib.js';

const EMAILS = numberArg('emails', 100_000);
const INSTANCES = Math.max(1, numberArg('instances', 2));
const MAILER = stringArg('mailer', 'both');
const RUNS = Math.max(1, numberArg('runs', 1));
const TIMEOUT_MS = numberArg('timeout-s', 1800) * 1000;
const SENTINEL = 'x-bench-unsubscribe-url';
// --index old: put back the due index as it was before migration 0015 (next_attempt_at alone), so the claim's
// cost with and without the claim order in the index is measured on the same code, machine and load;
// --index both alternates them run by run.
const INDEX = stringArg('index', 'new');

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One real notification email (the bundled template, English), with a placeholder for the per-user link. */
function sampleEmail() {
  const renderer = createEmailRenderer({
    appName: 'Herald',
    accentColor: '#2563eb',
    defaultLocale: 'en',
    feBaseUrl: 'http://localhost:3000',
  });
  return renderer.render(
    {
      template: 'notification',
      type: 'announcement',
      title: 'Scheduled maintenance tonight',
      content: 'Scheduled maintenance tonight at 22:00 UTC. Expect up to ten minutes of reduced service.',
      unsubscribeUrl: SENTINEL,
    },
    'en',
  );
}

async function drainOnce(mailer: 'smtp' | 'instant', run: number, index: 'old' | 'new') {
  const sink = await startSmtpSink();
  const cluster = await startCluster({
    instances: INSTANCES,
    env: {
      ...PRODUCTION_LIVENESS,
      NODE_ENV: 'production',
      LOG_LEVEL: mailer === 'instant' ? 'error' : 'warn',
      SSE_KEEPALIVE_MS: '15000',
      SMTP_HOST: mailer === 'smtp' ? '127.0.0.1' : '',
      SMTP_PORT: String(sink.port),
    },
  });
  const db = new pg.Client({ connectionString: cluster.db.url });
  await db.connect();
  try {
    if (index === 'old') {
      await db.query('drop index email_outbox_due_idx');
      await db.query(
        `create index email_outbox_due_idx on email_outbox (next_attempt_at) where status = 'pending'`,
      );
    }
    const email = sampleEmail();
    const url = `http://127.0.0.1/email/unsubscribe?token=`;
    const loadBefore = machineLoad();
    const cpuBefore = Array.from({ length: INSTANCES }, (_, i) => cpuSecondsOfPort(cluster.port(i)));
    const tInsert = now();
    await db.query(
      `insert into email_outbox (dedupe_key, to_address, subject, text_body, html_body, headers)
       select 'notification:' || gen_random_uuid(), 'drain' || g || '@example.test', $2,
              replace($3, $6, $7 || md5(g::text)), replace($4, $6, $7 || md5(g::text)),
              replace($5, $6, $7 || md5(g::text))::jsonb
       from generate_series(1, $1::int) g`,
      [EMAILS, email.subject, email.text, email.html, JSON.stringify(email.headers), SENTINEL, url],
    );
    const tCommit = now();
    const deadline = tCommit + TIMEOUT_MS;
    const sentCount = async () =>
      Number(
        (await db.query<{ n: string }>(`select count(*) as n from email_outbox where status = 'sent'`))
          .rows[0]?.n,
      );
    // SMTP: the sink's count (no query load while draining); instant: the table's, once a second.
    for (;;) {
      const done = mailer === 'smtp' ? sink.received() >= EMAILS : (await sentCount()) >= EMAILS;
      if (done || now() > deadline) break;
      await sleep(mailer === 'smtp' ? 100 : 1000);
    }
    const tDone = now();
    const cpuAfter = Array.from({ length: INSTANCES }, (_, i) => cpuSecondsOfPort(cluster.port(i)));
    const loadAfter = machineLoad();
    // Rows received by the sink are settled just after; give the last round its commit.
    while (
      (await sentCount()) < Math.min(EMAILS, mailer === 'smtp' ? sink.received() : EMAILS) &&
      now() < deadline
    )
      await sleep(200);
    const stats = (
      await db.query<{
        sent: string;
        pending: string;
        failed: string;
        retried: string;
        settles: string;
        first_ms: string;
        last_ms: string;
        bytes: string;
      }>(
        `select count(*) filter (where status = 'sent') as sent,
                count(*) filter (where status = 'pending') as pending,
                count(*) filter (where status = 'failed') as failed,
                count(*) filter (where attempts > 1) as retried,
                count(distinct sent_at) as settles,
                extract(epoch from min(sent_at)) * 1000 as first_ms,
                extract(epoch from max(sent_at)) * 1000 as last_ms,
                avg(length(html_body) + length(text_body))::int as bytes
         from email_outbox`,
      )
    ).rows[0];
    if (!stats) throw new Error('no stats');
    // When each tenth of the emails had been settled: a drain that slows as it goes (the claim scanning ever more
    // settled rows) shows as falling rates from tenth to tenth.
    const marks =
      (
        await db.query<{ ms: string[] }>(
          `select array_agg(extract(epoch from m) * 1000 order by q) as ms
         from unnest(array[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]) q,
              lateral (select percentile_disc(q) within group (order by sent_at) as m
                       from email_outbox where status = 'sent') p`,
        )
      ).rows[0]?.ms.map(Number) ?? [];
    const tenths = marks.map((ms, i) =>
      Math.round(
        EMAILS /
          10 /
          Math.max(0.001, (ms - (i === 0 ? Number(stats.first_ms) : (marks[i - 1] ?? ms))) / 1000),
      ),
    );
    const sent = Number(stats.sent);
    const settles = Number(stats.settles);
    const wallS = (tDone - tCommit) / 1000;
    const spanS = (Number(stats.last_ms) - Number(stats.first_ms)) / 1000;
    const cpuS = cpuAfter.reduce((s, c, i) => s + (c - (cpuBefore[i] ?? 0)), 0);
    return {
      mailer,
      'due index': index === 'old' ? '(next_attempt_at)' : '(next_attempt_at, id)',
      run,
      instances: INSTANCES,
      emails: EMAILS,
      'insert s': ((tCommit - tInsert) / 1000).toFixed(1),
      sent,
      'smtp received': mailer === 'smtp' ? sink.received() : '—',
      'pending/failed/retried': `${stats.pending}/${stats.failed}/${stats.retried}`,
      'commit → all sent s': wallS.toFixed(1),
      'emails/s (from commit)': Math.round(sent / wallS),
      'emails/s (first → last settle)': Math.round(sent / Math.max(spanS, 0.001)),
      'settle statements': settles,
      'settles per email': (settles / Math.max(1, sent)).toFixed(4),
      'emails per settle': (sent / Math.max(1, settles)).toFixed(1),
      'server CPU ms/email': ((cpuS * 1000) / Math.max(1, sent)).toFixed(2),
      'bytes/email (html+text)': Number(stats.bytes),
      'emails/s by tenth': tenths.join(' '),
      load: `${loadBefore.split(' (')[0]} → ${loadAfter.split(' (')[0]}`,
    };
  } finally {
    await db.end();
    await cluster.close();
    await sink.close();
  }
}

async function main() {
  const mailers = (MAILER === 'both' ? ['smtp', 'instant'] : [MAILER]) as Array<'smtp' | 'instant'>;
  const rows: Array<Record<string, string | number>> = [];
  for (let run = 1; run <= RUNS; run++) {
    for (const mailer of mailers) {
      for (const index of (INDEX === 'both' ? ['old', 'new'] : [INDEX]) as Array<'old' | 'new'>) {
        console.log(
          `run ${run}, ${mailer}, ${index} index: ${EMAILS} emails, ${INSTANCES} instance(s); ${machineLoad()}`,
        );
        const row = await drainOnce(mailer, run, index);
        console.log(JSON.stringify(row));
        rows.push(row);
      }
    }
  }
  printTable(rows, '\noutbox drain (fresh database and server processes per run)');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
