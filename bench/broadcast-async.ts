// A broadcast to every user, accepted asynchronously (issue 27 target 4; CONTRACT §5 "Large sends"):
//  - seeds --users users (default 100,000) in SQL with generate_series: verified emails and a preference mix
//    (--email-share, default 0.1: that share keeps the default preferences, so an `announcement` reaches them by
//    email when offline; of the rest two thirds turned email off and one third gets email only for mentions);
//  - starts --instances real server processes (default 2; startCluster: NODE_ENV=production, production liveness
//    timings, PostgreSQL, a private redis-server, no held workers) whose SMTP is a counting sink in this process
//    (startSmtpSink: pooled nodemailer SMTP to a server that accepts and discards each message);
//  - signs in --streams of those users (default 1,000, spread evenly over the id range, so they sit in every part
//    of the keyset walk) and holds one SSE stream each, alternating instances, in a worker thread;
//  - POSTs `{ scope: "all" }` with `Prefer: respond-async` to instance 0 and times: the 202; every stream's
//    `new_notification` (p50/p99/max, from the request's start); GET /admin/notifications/sends/:id reporting
//    `done`; the SMTP sink having received every email the broadcast queued;
//  - then checks exactness: send counts; one notification per user and no duplicates (SQL, every user); every
//    cursor's unread count = 1; for a sample of signed-in users (stream holders and offline ones) the HTTP unread
//    count = 1 and the list holds the one notification; a resume from each sample stream's first cursor replays
//    the notification exactly once; every queued email sent once.
// Usage: npm run bench -- broadcast-async [--users 100000] [--streams 1000] [--instances 2] [--email-share 0.1]
//        [--sample 50] [--timeout-s 3600]
import { Worker } from 'node:worker_threads';
import { CLUSTER_ORIGIN, openStream, startCluster, startSmtpSink } from '@herald/server/testkit';
import pg from 'pg';
import { hashPassword } from '../server/src/auth/auth.js';
import type { FromWorker, StreamsInit, ToWorker } from './_broadcast-streams.js';
import {
  machineLoad,
  numberArg,
  ONE_ADDRESS_LIMITS,
  PRODUCTION_LIVENESS,
  percentile,
  printTable,
  signIn,
} from './_lib.js';

const USERS = numberArg('users', 100_000);
const STREAMS = Math.min(USERS, numberArg('streams', 1000));
const INSTANCES = Math.max(1, numberArg('instances', 2));
const EMAIL_SHARE = numberArg('email-share', 0.1);
const SAMPLE = Math.min(STREAMS, numberArg('sample', 50));
const TIMEOUT_MS = numberArg('timeout-s', 3600) * 1000;
const PASSWORD = 'correct horse battery staple';

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const secs = (ms: number) => (ms / 1000).toFixed(2);
const userId = (g: number) => `u${String(g).padStart(8, '0')}`;

/** Runs `task(i)` for i in [0, count) with at most `limit` in flight. */
async function pool(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

/**
 * The preference mix by user number (1-based), the same in SQL and here: bucket = g mod 1000, the first
 * EMAIL_SHARE of the buckets keep defaults (email for announcements), then two thirds email off, one third
 * email for mentions only.
 */
const emailBuckets = Math.round(EMAIL_SHARE * 1000);
const getsEmail = (g: number) => g % 1000 < emailBuckets;

async function main() {
  const sink = await startSmtpSink();
  console.log(
    `${USERS} users, ${STREAMS} streams, ${INSTANCES} instance(s), email share ${EMAIL_SHARE}; starting…; ${machineLoad()}`,
  );
  const cluster = await startCluster({
    instances: INSTANCES,
    env: {
      ...ONE_ADDRESS_LIMITS,
      ...PRODUCTION_LIVENESS,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      // The harness's 1 s keep-alive is for tests; production sends one per stream every 15 s.
      SSE_KEEPALIVE_MS: '15000',
      AUTH_RATE_LIMIT_MAX: '100000000',
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: String(sink.port),
    },
  });
  const db = new pg.Client({ connectionString: cluster.db.url });
  await db.connect();
  let worker: Worker | undefined;
  try {
    // ---- seed (SQL) ----
    const hash = await hashPassword(PASSWORD);
    const tSeed = now();
    await db.query(
      `insert into "user" (id, name, email, email_verified, created_at, updated_at)
       select 'u' || lpad(g::text, 8, '0'), 'User ' || g, 'u' || g || '@example.test', true, now(), now()
       from generate_series(1, $1::int) g`,
      [USERS],
    );
    await db.query(
      `insert into notification_preference (user_id, email_enabled, email_types)
       select 'u' || lpad(g::text, 8, '0'), (g % 1000 - $2) % 3 = 2,
              case when (g % 1000 - $2) % 3 = 2 then array['mention'] end
       from generate_series(1, $1::int) g where g % 1000 >= $2`,
      [USERS, emailBuckets],
    );
    // Stream holders spread over the id range; the offline sample right after each of the first SAMPLE of them.
    const streamUsers = Array.from(
      { length: STREAMS },
      (_, k) => 1 + Math.floor(((k + 0.5) * USERS) / STREAMS),
    );
    const offlineSample = streamUsers
      .slice(0, SAMPLE)
      .map((g) => (g + 1 <= USERS && !streamUsers.includes(g + 1) ? g + 1 : g - 1))
      .filter((g) => g >= 1 && !streamUsers.includes(g));
    const withAccounts = [...streamUsers, ...offlineSample];
    await db.query(
      `insert into account (id, account_id, provider_id, user_id, password, created_at, updated_at)
       select 'acc-' || u, u, 'credential', u, $2, now(), now() from unnest($1::text[]) u`,
      [withAccounts.map(userId), hash],
    );
    await db.query(
      `insert into "user" (id, name, email, email_verified, role, created_at, updated_at)
       values ('admin', 'Bench admin', 'admin@example.test', true, 'admin', now(), now())`,
    );
    await db.query(
      `insert into account (id, account_id, provider_id, user_id, password, created_at, updated_at)
       values ('acc-admin', 'admin', 'credential', 'admin', $1, now(), now())`,
      [hash],
    );
    await db.query('analyze');
    const seedMs = now() - tSeed;
    const adminCookie = await signIn(cluster.url(0), 'admin@example.test', PASSWORD);

    // ---- sign-ins and streams ----
    const tSignIn = now();
    const cookies = new Map<number, string>();
    await pool(withAccounts.length, 8, async (i) => {
      const g = withAccounts[i] ?? 0;
      cookies.set(g, await signIn(cluster.url(i % INSTANCES), `u${g}@example.test`, PASSWORD));
    });
    const signInMs = now() - tSignIn;
    const marker = `bcast-${Date.now().toString(36)}`;
    const title = `Maintenance ${marker}`;
    const init: StreamsInit = {
      streams: streamUsers.map((g, k) => ({ url: cluster.url(k % INSTANCES), cookie: cookies.get(g) ?? '' })),
      marker,
      concurrency: 50,
    };
    worker = new Worker(new URL('./_broadcast-streams.ts', import.meta.url), { workerData: init });
    const w = worker;
    const fromWorker = (type: FromWorker['type']) =>
      new Promise<FromWorker>((resolve, reject) => {
        const onMessage = (msg: FromWorker) => {
          if (msg.type === 'failed') reject(new Error(`stream worker: ${msg.error}`));
          else if (msg.type === type) resolve(msg);
          else return;
          w.off('message', onMessage);
        };
        w.on('message', onMessage);
        w.once('error', reject);
      });
    const ready = (await fromWorker('ready')) as Extract<FromWorker, { type: 'ready' }>;
    console.log(
      `seeded in ${secs(seedMs)} s; ${withAccounts.length} sign-ins in ${secs(signInMs)} s; ${STREAMS} streams open in ${secs(ready.openMs)} s; ${machineLoad()}`,
    );
    // Presence is published with a debounce: let every stream count as online before sending.
    await sleep(2_000);

    // ---- the send ----
    const loadBefore = machineLoad();
    const t0 = now();
    const res = await fetch(`${cluster.url(0)}/admin/notifications/send`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        origin: CLUSTER_ORIGIN,
        cookie: adminCookie,
        prefer: 'respond-async',
      },
      body: JSON.stringify({
        target: { scope: 'all' },
        notification: {
          type: 'announcement',
          title,
          content: 'Scheduled maintenance tonight at 22:00 UTC. Expect up to ten minutes of reduced service.',
        },
      }),
    });
    const accepted = (await res.json()) as { sendId?: string; status?: string };
    const t202 = now();
    if (res.status !== 202 || !accepted.sendId) {
      throw new Error(`expected 202, got ${res.status} ${JSON.stringify(accepted)}`);
    }
    const location = res.headers.get('location');
    const deadline = t0 + TIMEOUT_MS;

    interface SendView {
      status: string;
      targetCount: number;
      createdCount: number;
      skippedCount: number;
      failures: unknown[];
    }
    let view: SendView | undefined;
    let tRunning = Number.NaN;
    let tDone = Number.NaN;
    let tEmails = Number.NaN;
    let expectedEmails = Number.NaN;
    const progress: string[] = [];
    let lastProgressLog = t0;
    // One loop polls the progress resource (4×/s, as a client would) until done, then the sink until every
    // email the send queued has arrived.
    while (now() < deadline) {
      if (Number.isNaN(tDone)) {
        const r = await fetch(`${cluster.url(1 % INSTANCES)}${location}`, {
          headers: { cookie: adminCookie },
        });
        view = (await r.json()) as SendView;
        if (r.status !== 200) throw new Error(`progress: ${r.status} ${JSON.stringify(view)}`);
        if (view.status !== 'queued' && Number.isNaN(tRunning)) tRunning = now();
        if (now() - lastProgressLog > 10_000) {
          lastProgressLog = now();
          const line = `${secs(now() - t0)} s: ${view.status}, created ${view.createdCount}, emails ${sink.received()}`;
          progress.push(line);
          console.log(`  ${line}`);
        }
        if (view.status === 'failed') throw new Error(`send failed: ${JSON.stringify(view)}`);
        if (view.status === 'done') {
          tDone = now();
          const q = await db.query<{ n: string }>(
            `select count(*) as n from email_outbox where dedupe_key like 'notification:%'`,
          );
          expectedEmails = Number(q.rows[0]?.n);
        }
        await sleep(250);
      } else {
        if (sink.received() >= expectedEmails) {
          tEmails = sink.lastAt();
          break;
        }
        await sleep(100);
      }
    }
    const loadAfter = machineLoad();

    // ---- streams ----
    const report = async () => {
      const p = fromWorker('report');
      w.postMessage({ type: 'report' } satisfies ToWorker);
      return (await p) as Extract<FromWorker, { type: 'report' }>;
    };
    let streams = await report();
    for (let i = 0; i < 50 && streams.receivedAt.some((t) => Number.isNaN(t)); i++) {
      await sleep(200);
      streams = await report();
    }
    const latencies = streams.receivedAt
      .filter((t) => !Number.isNaN(t))
      .map((t) => t - t0)
      .sort((a, b) => a - b);
    const missing = streams.receivedAt.length - latencies.length;

    // ---- exactness ----
    const one = async <T extends pg.QueryResultRow>(text: string, params: unknown[] = []) =>
      (await db.query<T>(text, params)).rows[0] as T;
    const perUser = await one<{ notifications: string; users: string; dup_users: string }>(
      `select count(*) as notifications, count(distinct user_id) as users,
              (select count(*) from (select 1 from notification where title = $1 group by user_id having count(*) > 1) d)
                as dup_users
       from notification where title = $1`,
      [title],
    );
    const cursors = await one<{ exact: string; other: string }>(
      `select count(*) filter (where unread = 1) as exact, count(*) filter (where unread <> 1) as other
       from notification_cursor`,
    );
    const outbox = await one<{ sent: string; other: string; settles: string; retried: string }>(
      `select count(*) filter (where status = 'sent') as sent, count(*) filter (where status <> 'sent') as other,
              count(distinct sent_at) as settles, count(*) filter (where attempts > 1) as retried
       from email_outbox where dedupe_key like 'notification:%'`,
    );
    const streaming = new Set(streamUsers);
    // The admin (default preferences, no stream) is emailed too.
    let predictedEmails = 1;
    for (let g = 1; g <= USERS; g++) if (getsEmail(g) && !streaming.has(g)) predictedEmails++;

    // HTTP sample: SAMPLE stream holders and the offline sample, alternating instances.
    const sampleUsers = [...streamUsers.slice(0, SAMPLE), ...offlineSample];
    let unreadOk = 0;
    let listOk = 0;
    await pool(sampleUsers.length, 8, async (i) => {
      const g = sampleUsers[i] ?? 0;
      const base = cluster.url(i % INSTANCES);
      const headers = { cookie: cookies.get(g) ?? '' };
      const u = (await (await fetch(`${base}/notification/unread-count`, { headers })).json()) as {
        unreadCount: number;
      };
      if (u.unreadCount === 1) unreadOk++;
      const l = (await (await fetch(`${base}/notification/list`, { headers })).json()) as {
        notifications: Array<{ title: string; userId: string }>;
        pagination: { totalCount: number };
      };
      if (
        l.pagination.totalCount === 1 &&
        l.notifications[0]?.title === title &&
        l.notifications[0].userId === userId(g)
      )
        listOk++;
    });
    // Resume: a reconnect from the cursor each sample stream was given before the send replays it exactly once.
    let resumeOk = 0;
    await pool(SAMPLE, 8, async (k) => {
      const g = streamUsers[k] ?? 0;
      const client = await openStream(cluster.url((k + 1) % INSTANCES), cookies.get(g), {
        lastEventId: ready.connectedIds[k] ?? '',
      });
      try {
        const connected = await client.waitFor((e) => e.event === 'connected', 30_000);
        await client.waitFor((e) => e.event === 'unread_count_changed', 30_000);
        await sleep(300);
        const replayed = client.events.filter(
          (e) =>
            e.event === 'new_notification' &&
            (e.data.notification as { title?: string } | undefined)?.title === title,
        ).length;
        if (connected.data.resumed === true && connected.data.resync === false && replayed === 1) resumeOk++;
      } finally {
        client.close();
      }
    });

    const total = USERS + 1; // the admin is a user too
    console.log(
      `\n${USERS} users (+1 admin), ${STREAMS} SSE streams over ${INSTANCES} instance(s), ${expectedEmails} emails queued ` +
        `(predicted ${predictedEmails}); times from the start of the POST; ${loadBefore} → ${loadAfter}`,
    );
    printTable([
      { measure: 'accepted: POST → 202', value: `${(t202 - t0).toFixed(0)} ms (status ${accepted.status})` },
      { measure: 'claimed by a worker (first non-queued poll)', value: `${secs(tRunning - t0)} s` },
      {
        measure: `streams reached (${STREAMS - missing} of ${STREAMS})`,
        value: `p50 ${secs(percentile(latencies, 50))} s, p99 ${secs(percentile(latencies, 99))} s, max ${secs(latencies.at(-1) ?? Number.NaN)} s`,
      },
      { measure: 'progress resource says done', value: `${secs(tDone - t0)} s` },
      {
        measure: `every queued email at the SMTP sink (${sink.received()} of ${expectedEmails})`,
        value: `${secs(tEmails - t0)} s (first email ${secs(sink.firstAt() - t0)} s)`,
      },
      {
        measure: 'send view',
        value: `target ${view?.targetCount}/${total}, created ${view?.createdCount}/${total}, skipped ${view?.skippedCount}, failures ${view?.failures.length}`,
      },
      {
        measure: 'notifications (SQL, every user)',
        value: `${perUser.notifications} for ${perUser.users} users; users with > 1: ${perUser.dup_users}`,
      },
      { measure: 'cursors unread = 1 / other', value: `${cursors.exact} / ${cursors.other}` },
      {
        measure: `HTTP sample (${sampleUsers.length} users): unread-count = 1, list = [it]`,
        value: `${unreadOk} / ${listOk} of ${sampleUsers.length}`,
      },
      {
        measure: `resume from the pre-send cursor (${SAMPLE} streams): replayed once`,
        value: `${resumeOk} of ${SAMPLE}`,
      },
      {
        measure: 'stream duplicates / streams ended by the server',
        value: `${streams.duplicates} / ${streams.ended}`,
      },
      {
        measure: 'emails: sent / not sent / retried; settle statements',
        value: `${outbox.sent} / ${outbox.other} / ${outbox.retried}; ${outbox.settles} (${(Number(outbox.sent) / Math.max(1, Number(outbox.settles))).toFixed(1)} emails each)`,
      },
    ]);
    const warnings = Array.from({ length: INSTANCES }, (_, i) => cluster.logs(i).length);
    console.log(`server log lines (warn and above) per instance: ${warnings.join(', ')}`);
    for (let i = 0; i < INSTANCES; i++)
      for (const line of cluster.logs(i).slice(0, 3)) console.log(`  ${line.slice(0, 300)}`);
  } finally {
    if (worker) {
      worker.postMessage({ type: 'close' } satisfies ToWorker);
      await worker.terminate();
    }
    await db.end();
    await cluster.close();
    await sink.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
