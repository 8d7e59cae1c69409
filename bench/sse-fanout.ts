// SSE fan-out of an admin broadcast across instances: two real server processes (shared PostgreSQL database,
// private redis-server), N users each holding ONE open `GET /notification/stream`, half on instance A and half on
// B. An admin sends `{ scope: "all" }` to A; for every stream we measure the time from just before the send
// request to the receipt of its `new_notification` event. Also prints server RSS growth per open stream.
// --cluster: the instances share a private Redis Cluster (3 masters + 3 replicas) instead of one redis-server.
// Usage: npm run bench -- sse-fanout [--users 5000] [--streams-per-user 1] [--signin-concurrency 16]
//        [--connect-concurrency 100] [--cluster] [--cold] [--write-concurrency N] [--breakdown] [--rounds N] [--cpu-prof-dir DIR]   (run `ulimit -n 65536` first if the soft limit is below
//        ~2 × streams; --cold: no warm-up broadcast before the measured one)
// `--streams-per-user k` (≤ SSE_MAX_STREAMS_PER_USER, 10) opens k streams per user (a user's tabs), so 10,000
// streams need 1,000 scrypt sign-ins instead of 10,000 on a shared 2-core machine; each stream still receives
// its own copy of the event.
import net from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster } from '@herald/server/testkit';
import pg from 'pg';
import {
  flagArg,
  machineLoad,
  numberArg,
  ONE_ADDRESS_LIMITS,
  PRODUCTION_LIVENESS,
  percentile,
  printTable,
  rssOfPort,
  signIn,
  stringArg,
} from './_lib.js';

const USERS = numberArg('users', 5000);
const PER_USER = Math.max(1, Math.min(10, numberArg('streams-per-user', 1)));
const STREAMS = USERS * PER_USER;
const SIGNIN_CONCURRENCY = numberArg('signin-concurrency', 16);
const CONNECT_CONCURRENCY = numberArg('connect-concurrency', 100);
// How long to wait for the last events after the send response before counting the rest as missing.
const RECEIVE_TIMEOUT_MS = numberArg('timeout-ms', 30_000);
// Measure the very first broadcast of the instances (no warm-up broadcast before it).
const COLD = flagArg('cold');
// --write-concurrency N: the instances' BROADCAST_WRITE_CONCURRENCY (batch statements in flight; default: theirs).
const WRITE_CONCURRENCY = numberArg('write-concurrency', 0);
// --breakdown: the instances log at debug level, and the sender's per-batch lines ('notification batch created')
// are printed as a timeline from the send: when each batch's second half ended and what its parts took.
const BREAKDOWN = flagArg('breakdown');
// --rounds N: N measured broadcasts on the same streams (the 10,000 sign-ins are paid once), ROUND_GAP_MS apart.
const ROUNDS = Math.max(1, Math.min(99, numberArg('rounds', 1)));
const ROUND_GAP_MS = 5_000;
// --cpu-prof-dir DIR: both instances run under --cpu-prof (the profile covers the sign-ins too; `npx tsx
// bench/_profile.ts FILE --last-seconds S` keeps the rounds at the end).
const CPU_PROF_DIR = stringArg('cpu-prof-dir', '');
const PASSWORD = 'correct horse battery staple';

/** Runs `task(i)` for i in [0, count) with at most `limit` in flight. */
async function pool(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

// The client side of each stream is a bare TCP socket that sends the request line and reads bytes (latin1
// strings, no HTTP parser, no chunked decoding, no line splitting): with 10,000 streams on the same 2 cores as
// the servers, a full HTTP client's per-chunk cost was a visible part of the measured latency. Matches are counted
// in the raw bytes; SSE frames are written whole, so chunk framing never splits a marker, and a match that spans
// two reads is found through the kept tail. Per-stream state is kept in typed arrays indexed by stream number.
interface Streams {
  sockets: net.Socket[];
  receivedAt: Float64Array;
  count: Uint16Array;
  dropped: number;
  errorEvents: number;
  closing: boolean;
  marker: string;
}

const CONNECTED = 'event: connected';
const ERROR_EVENT = 'event: error';

/** Occurrences of `pattern` in `text` that end after the first `seen` characters (those were counted before). */
function countNew(text: string, pattern: string, seen: number): number {
  let n = 0;
  let at = text.indexOf(pattern, Math.max(0, seen - pattern.length + 1));
  while (at >= 0) {
    n++;
    at = text.indexOf(pattern, at + pattern.length);
  }
  return n;
}

function openStream(s: Streams, i: number, port: number, cookie: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const keep = Math.max(s.marker.length, CONNECTED.length, ERROR_EVENT.length) - 1;
    const socket = net.connect({ host: '127.0.0.1', port });
    s.sockets[i] = socket;
    socket.setEncoding('latin1');
    let head = true;
    let connected = false;
    let tail = '';
    socket.on('connect', () => {
      socket.write(
        `GET /notification/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nCookie: ${cookie}\r\n` +
          'Accept: text/event-stream\r\n\r\n',
      );
    });
    socket.on('data', (chunk: string) => {
      const now = performance.now();
      const text = tail + chunk;
      if (head) {
        const eol = text.indexOf('\r\n');
        if (eol < 0) {
          tail = text;
          return;
        }
        if (!text.startsWith('HTTP/1.1 200')) {
          reject(new Error(`stream ${i}: ${text.slice(0, eol)}`));
          socket.destroy();
          return;
        }
        head = false;
        tail = '';
      }
      const seen = head ? 0 : tail.length;
      const hits = countNew(text, s.marker, seen);
      if (hits > 0) {
        if (s.count[i] === 0) s.receivedAt[i] = now;
        s.count[i] = (s.count[i] ?? 0) + hits;
      }
      if (!connected && text.includes(CONNECTED)) {
        connected = true;
        resolve();
      }
      if (!s.closing) s.errorEvents += countNew(text, ERROR_EVENT, seen);
      tail = text.length > keep ? text.slice(text.length - keep) : text;
    });
    socket.on('close', () => {
      if (!s.closing) s.dropped++;
      if (!connected) reject(new Error(`stream ${i} closed before connected`));
    });
    socket.on('error', (err) => {
      if (!s.closing) reject(err);
    });
  });
}

function summarise(label: string, latencies: number[], streams: number, missing: number, dups: number) {
  latencies.sort((a, b) => a - b);
  return {
    streams: label,
    count: streams,
    received: latencies.length,
    'p50 ms': percentile(latencies, 50).toFixed(0),
    'p90 ms': percentile(latencies, 90).toFixed(0),
    'p99 ms': percentile(latencies, 99).toFixed(0),
    'max ms': (latencies.at(-1) ?? Number.NaN).toFixed(0),
    missing,
    duplicates: dups,
  };
}

/** The sender's per-batch debug lines since the send: when each ended (ms after the send) and its parts. */
function printBatchTimeline(lines: string[], sendEpochMs: number) {
  const rows: Array<Record<string, string | number>> = [];
  for (const line of lines) {
    if (!line.includes('notification batch created')) continue;
    try {
      const l = JSON.parse(line) as {
        time?: number;
        users?: number;
        insertMs?: number;
        unreadCacheMs?: number;
        publishMs?: number;
        deliveryMs?: Record<string, number>;
      };
      rows.push({
        'ended at ms': ((l.time ?? sendEpochMs) - sendEpochMs).toFixed(0),
        users: l.users ?? 0,
        'insert ms': (l.insertMs ?? 0).toFixed(1),
        'unread cache ms': (l.unreadCacheMs ?? 0).toFixed(1),
        'bus publish ms': (l.publishMs ?? 0).toFixed(1),
        'delivery ms': Object.entries(l.deliveryMs ?? {})
          .map(([k, v]) => `${k} ${v.toFixed(1)}`)
          .join(', '),
      });
    } catch {
      // Not a JSON log line.
    }
  }
  console.log(`\nsender's batches (--breakdown; a batch's line is written when its second half ends):`);
  printTable(rows);
}

async function main() {
  const onCluster = flagArg('cluster');
  console.log(
    `starting 2 instances (PostgreSQL + ${onCluster ? 'private Redis Cluster, 3 masters + 3 replicas' : 'private redis-server'})…; ${machineLoad()}`,
  );
  const cluster = await startCluster({
    instances: 2,
    redis: onCluster ? 'cluster' : 'private',
    env: {
      ...ONE_ADDRESS_LIMITS,
      ...PRODUCTION_LIVENESS,
      LOG_LEVEL: BREAKDOWN ? 'debug' : 'warn',
      AUTH_RATE_LIMIT_MAX: '100000000',
      // The harness shrinks keep-alives to 1 s for tests; use the production default so N streams do not
      // add N keep-alive events per second to the measurement.
      SSE_KEEPALIVE_MS: '15000',
      ...(WRITE_CONCURRENCY > 0 ? { BROADCAST_WRITE_CONCURRENCY: String(WRITE_CONCURRENCY) } : {}),
      ...(CPU_PROF_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${CPU_PROF_DIR}` } : {}),
    },
  });
  const s: Streams = {
    sockets: [],
    receivedAt: new Float64Array(STREAMS).fill(Number.NaN),
    count: new Uint16Array(STREAMS),
    dropped: 0,
    errorEvents: 0,
    closing: false,
    // The round suffix (-r01 …) is part of the marker from the start: the streams size their carry-over for it.
    marker: `sse-fanout-${Date.now()}-r00`,
  };
  const db = new pg.Client({ connectionString: cluster.db.url });
  await db.connect();
  try {
    const setupStart = performance.now();
    // One user through the real endpoints: its scrypt hash (salt embedded) verifies the same password for
    // every seeded account, so the server computes it once.
    const admin = await createVerifiedUserOn(cluster, 0, { name: 'Bench admin', password: PASSWORD });
    const account = await db.query<{ password: string; provider_id: string; account_id: string }>(
      'select password, provider_id, account_id from account where user_id = $1',
      [admin.id],
    );
    const real = account.rows[0];
    if (!real || real.account_id !== admin.id) throw new Error('unexpected credential account layout');
    const seedStart = performance.now();
    await db.query(
      `insert into "user" (id, name, email, email_verified, created_at, updated_at)
       select 'sse-' || lpad(g::text, 6, '0'), 'SSE ' || g, 'sse' || g || '@example.test', true, now(), now()
       from generate_series(1, $1::int) g`,
      [USERS],
    );
    await db.query(
      `insert into account (id, account_id, provider_id, user_id, password, created_at, updated_at)
       select 'sse-acc-' || lpad(g::text, 6, '0'), 'sse-' || lpad(g::text, 6, '0'), $2,
              'sse-' || lpad(g::text, 6, '0'), $3, now(), now()
       from generate_series(1, $1::int) g`,
      [USERS, real.provider_id, real.password],
    );
    const seedMs = performance.now() - seedStart;
    await db.query(`update "user" set role = 'admin' where id = $1`, [admin.id]);
    const adminCookie = await signIn(cluster.url(0), admin.email, PASSWORD);

    // Sign-ins alternate between the instances so both spend their scrypt time.
    const signInStart = performance.now();
    const cookies: string[] = new Array(USERS);
    await pool(USERS, SIGNIN_CONCURRENCY, async (i) => {
      cookies[i] = await signIn(cluster.url(i % 2), `sse${i + 1}@example.test`, PASSWORD);
    });
    const signInMs = performance.now() - signInStart;
    const setupMs = performance.now() - setupStart;

    const logLinesBefore = [cluster.logs(0).length, cluster.logs(1).length];
    const rssBefore = [rssOfPort(cluster.port(0)), rssOfPort(cluster.port(1))];
    const connectStart = performance.now();
    // Stream i lives on instance i % 2: even = A (where the send goes), odd = B.
    // Stream i belongs to user ⌊i / PER_USER⌋: with several streams per user, a user's tabs alternate A and B.
    await pool(STREAMS, CONNECT_CONCURRENCY, (i) =>
      openStream(s, i, cluster.port(i % 2), cookies[Math.floor(i / PER_USER)] ?? ''),
    );
    const connectMs = performance.now() - connectStart;
    cookies.length = 0;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const rssAfter = [rssOfPort(cluster.port(0)), rssOfPort(cluster.port(1))];
    const onA = Math.ceil(STREAMS / 2);
    const onB = STREAMS - onA;
    console.log(
      `setup ${(setupMs / 1000).toFixed(1)} s (seed ${USERS} users + accounts ${seedMs.toFixed(0)} ms, ` +
        `${USERS} sign-ins at ${SIGNIN_CONCURRENCY} in flight ${(signInMs / 1000).toFixed(1)} s = ` +
        `${(USERS / (signInMs / 1000)).toFixed(0)}/s); ${STREAMS} streams connected in ` +
        `${(connectMs / 1000).toFixed(1)} s; broadcasting on A…`,
    );

    const send = (title: string) =>
      fetch(`${cluster.url(0)}/admin/notifications/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: adminCookie },
        body: JSON.stringify({
          target: { scope: 'all' },
          notification: {
            type: 'announcement',
            title,
            content: 'Scheduled maintenance tonight at 22:00 UTC.',
          },
        }),
      });
    /**
     * The send's outcome: a 200's body, or for a 202 (an audience above BROADCAST_ASYNC_THRESHOLD, as 10,000 users
     * are by default) the progress resource polled until done. The latency figures do not wait for it: streams
     * are timed from the request's start either way.
     */
    const outcome = async (res: Response): Promise<{ targetCount?: number; createdCount?: number }> => {
      const body = (await res.json()) as { targetCount?: number; createdCount?: number; status?: string };
      if (res.status === 200) return body;
      const location = res.headers.get('location');
      if (res.status !== 202 || !location)
        throw new Error(`send failed: ${res.status} ${JSON.stringify(body)}`);
      for (const until = performance.now() + 120_000; performance.now() < until; ) {
        const r = await fetch(`${cluster.url(1)}${location}`, { headers: { cookie: adminCookie } });
        const view = (await r.json()) as { status?: string; targetCount?: number; createdCount?: number };
        if (view.status === 'done') return view;
        if (view.status === 'failed') throw new Error(`send failed: ${JSON.stringify(view)}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      throw new Error('send not done within 120 s');
    };
    let sendStatus = 0;
    if (!COLD) {
      // Steady state, as the other benches measure: one broadcast (without the marker) first, so the measured
      // one does not pay the instances' first-call costs (JIT, statement planning); it is given 3 s to drain.
      const warmStart = performance.now();
      const warm = await send('Warm-up');
      const warmResponseMs = performance.now() - warmStart;
      await outcome(warm);
      console.log(
        `warm-up broadcast: send HTTP ${warm.status} in ${warmResponseMs.toFixed(0)} ms, done in ${(performance.now() - warmStart).toFixed(0)} ms`,
      );
      await new Promise((resolve) => setTimeout(resolve, 3_000));
    }

    const baseMarker = s.marker.slice(0, -4);
    const roundsFromUs = process.hrtime.bigint() / 1000n;
    for (let round = 1; round <= ROUNDS; round++) {
      // A fresh marker of the same length per round (the streams' carry-over tail is sized for it), and fresh
      // counters, so a late frame of an earlier round is never counted in this one.
      s.marker = `${baseMarker}-r${String(round).padStart(2, '0')}`;
      s.count.fill(0);
      s.receivedAt.fill(Number.NaN);
      if (round > 1) await new Promise((resolve) => setTimeout(resolve, ROUND_GAP_MS));
      if (ROUNDS > 1) console.log(`\n--- round ${round} of ${ROUNDS}`);
      const loopDelay = monitorEventLoopDelay({ resolution: 10 });
      loopDelay.enable();
      const logsAtSend = cluster.logs(0).length;
      const sendEpochMs = Date.now();
      const sendStart = performance.now();
      const res = await send(`Maintenance ${s.marker}`);
      const sendMs = performance.now() - sendStart;
      sendStatus = res.status;
      const sendBody = await outcome(res);

      const received = () => s.count.reduce((n, c) => n + (c > 0 ? 1 : 0), 0);
      const deadline = performance.now() + RECEIVE_TIMEOUT_MS;
      while (received() < STREAMS && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // A short grace period so late duplicates would still be counted.
      await new Promise((resolve) => setTimeout(resolve, 500));
      loopDelay.disable();

      const rows = [0, 1].map((instance) => {
        const latencies: number[] = [];
        let missing = 0;
        let dups = 0;
        for (let i = instance; i < STREAMS; i += 2) {
          const c = s.count[i] ?? 0;
          if (c === 0) missing++;
          else latencies.push((s.receivedAt[i] ?? Number.NaN) - sendStart);
          if (c > 1) dups += c - 1;
        }
        return summarise(
          instance === 0 ? 'A (sender)' : 'B (other)',
          latencies,
          instance === 0 ? onA : onB,
          missing,
          dups,
        );
      });
      console.log(
        `\n${USERS} users × ${PER_USER} streams, ${onA} streams on A + ${onB} on B; send HTTP ${sendStatus} in ${sendMs.toFixed(0)} ms ` +
          `(targetCount ${sendBody.targetCount}, createdCount ${sendBody.createdCount}); ` +
          `latency = send start → new_notification received; ${machineLoad()}`,
      );
      printTable(rows);
      const kib = (i: number, n: number) => (((rssAfter[i] ?? 0) - (rssBefore[i] ?? 0)) / n).toFixed(1);
      console.log(
        `server RSS before/after streams: A ${rssBefore[0]}→${rssAfter[0]} KiB (${kib(0, onA)} KiB/stream), ` +
          `B ${rssBefore[1]}→${rssAfter[1]} KiB (${kib(1, onB)} KiB/stream)`,
      );
      console.log(
        `bench client event-loop delay during fan-out: p50 ${(loopDelay.percentile(50) / 1e6).toFixed(1)} ms, ` +
          `p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms, max ${(loopDelay.max / 1e6).toFixed(1)} ms`,
      );
      console.log(`streams dropped by the server: ${s.dropped}; error events: ${s.errorEvents}`);
      if (BREAKDOWN) printBatchTimeline(cluster.logs(0).slice(logsAtSend), sendEpochMs);
    }
    if (CPU_PROF_DIR) {
      console.log(
        `rounds window for the instances' profiles: --from-us ${roundsFromUs} --to-us ${process.hrtime.bigint() / 1000n}`,
      );
    }
    for (const i of [0, 1]) {
      const lines = cluster.logs(i).slice(logLinesBefore[i]);
      console.log(`instance ${i ? 'B' : 'A'} log lines (warn+) since streams opened: ${lines.length}`);
      for (const line of lines.slice(0, 3)) console.log(`  ${line.slice(0, 300)}`);
    }
  } finally {
    s.closing = true;
    for (const socket of s.sockets) socket?.destroy();
    await db.end();
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
