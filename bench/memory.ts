// Idle memory per connection, on real server processes (PostgreSQL + private redis-server). SSE: two instances;
// 500 users sign in on instance 0 and hold N idle streams (`GET /notification/stream`, 10 per user = the default
// per-user cap) on instance 1, so the measured process holds no password-check garbage (scrypt allocates
// megabytes per check). Chat: N idle guest sockets (`GET /chat`) on a fresh single instance. The measured
// process's RSS (/proc VmRSS) and V8 heap (the test-only /__test/memory route) are sampled at 0, step,
// 2 × step … N connections; the per-connection cost is the least-squares slope over those samples.
// `--gc none` (the default) measures the process as production runs it: no --expose-gc, no forced collection,
// samples taken `--idle-ms` after the last connect (V8 collects on its own schedule); `--gc forced` collects
// before each sample, which shows what the connections keep alive rather than what the process holds.
// Usage: npm run bench -- memory [--connections 5000] [--step 1000] [--kind sse|chat|both] [--gc none|forced]
//   [--idle-ms 1500]
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '@herald/server/testkit';
import pg from 'pg';
import { machineLoad, numberArg, ONE_ADDRESS_LIMITS, rssOfPort, signIn, stringArg } from './_lib.js';

const CONNECTIONS = numberArg('connections', 5000);
const STEP = numberArg('step', 1000);
const KIND = stringArg('kind', 'both');
const STREAMS_PER_USER = 10;
const CONNECT_CONCURRENCY = 50;
const GC = stringArg('gc', 'none');
if (GC !== 'none' && GC !== 'forced') throw new Error('--gc must be none or forced');
const IDLE_MS = numberArg('idle-ms', 1500);
const PASSWORD = 'correct horse battery staple';

interface Sample {
  connections: number;
  rssKiB: number;
  heapKiB: number;
  externalKiB: number;
}

/** Runs `task(i)` for i in [0, count) with at most `limit` in flight. */
async function pool(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The instance whose memory is sampled: the SSE run signs in on another one (see sseRun). */
async function sample(cluster: TestCluster, connections: number, at = 0): Promise<Sample> {
  // Let the last connects settle (greeting writes, presence debounce) before measuring.
  await pause(IDLE_MS);
  const read = async () => {
    const res = await fetch(`${cluster.url(at)}/__test/memory`);
    return (await res.json()) as { collected: boolean; heapUsed: number; external: number };
  };
  await read();
  const m = await read();
  if (GC === 'forced' && !m.collected) throw new Error('the server did not run with --expose-gc');
  return {
    connections,
    rssKiB: rssOfPort(cluster.port(at)),
    heapKiB: Math.round(m.heapUsed / 1024),
    externalKiB: Math.round(m.external / 1024),
  };
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

function report(label: string, samples: Sample[]) {
  console.log(`\n${label} (gc ${GC}, sampled ${IDLE_MS} ms after the last connect): ${machineLoad()}`);
  console.table(
    samples.map((s) => ({
      connections: s.connections,
      'RSS MiB': (s.rssKiB / 1024).toFixed(1),
      [GC === 'forced' ? 'heap MiB (after GC)' : 'heap MiB']: (s.heapKiB / 1024).toFixed(1),
      'external MiB': (s.externalKiB / 1024).toFixed(1),
    })),
  );
  const per = (pick: (s: Sample) => number) =>
    slope(samples.map((s) => [s.connections, pick(s)] as [number, number])).toFixed(2);
  console.log(
    `${label} slope per connection: RSS ${per((s) => s.rssKiB)} KiB, heap ${per((s) => s.heapKiB)} KiB, ` +
      `external ${per((s) => s.externalKiB)} KiB`,
  );
}

function startServer(extra: Record<string, string>, instances = 1) {
  return startCluster({
    instances,
    env: {
      ...ONE_ADDRESS_LIMITS,
      LOG_LEVEL: 'warn',
      ...(GC === 'forced' ? { NODE_OPTIONS: '--expose-gc' } : {}),
      AUTH_RATE_LIMIT_MAX: '100000000',
      // Production keep-alive and ping intervals: the connections are idle, as they are most of the time.
      SSE_KEEPALIVE_MS: '15000',
      WS_PING_INTERVAL_MS: '600000',
      ...extra,
    },
  });
}

// Streams are measured on instance 1 and the users sign in on instance 0: a password check allocates megabytes
// (scrypt), and without a forced collection that garbage, not the streams, would decide the sampled RSS.
const MEASURED = 1;

async function sseRun(): Promise<Sample[]> {
  const cluster = await startServer({}, 2);
  const db = new pg.Client({ connectionString: cluster.db.url });
  await db.connect();
  const requests: http.ClientRequest[] = [];
  try {
    // One account through the real endpoints; its scrypt hash verifies the same password for every copy.
    const first = await createVerifiedUserOn(cluster, 0, { name: 'Bench', password: PASSWORD });
    const { rows } = await db.query<{ password: string; provider_id: string }>(
      'select password, provider_id from account where user_id = $1',
      [first.id],
    );
    const real = rows[0];
    if (!real) throw new Error('no credential account');
    const users = Math.ceil(CONNECTIONS / STREAMS_PER_USER);
    await db.query(
      `insert into "user" (id, name, email, email_verified, created_at, updated_at)
       select 'mem-' || lpad(g::text, 6, '0'), 'Mem ' || g, 'mem' || g || '@example.test', true, now(), now()
       from generate_series(1, $1::int) g`,
      [users],
    );
    await db.query(
      `insert into account (id, account_id, provider_id, user_id, password, created_at, updated_at)
       select 'mem-acc-' || lpad(g::text, 6, '0'), 'mem-' || lpad(g::text, 6, '0'), $2,
              'mem-' || lpad(g::text, 6, '0'), $3, now(), now()
       from generate_series(1, $1::int) g`,
      [users, real.provider_id, real.password],
    );
    const cookies: string[] = new Array(users);
    await pool(users, 8, async (i) => {
      cookies[i] = await signIn(cluster.url(0), `mem${i + 1}@example.test`, PASSWORD);
    });
    const open = (i: number) =>
      new Promise<void>((resolve, reject) => {
        const req = http.get(
          {
            host: '127.0.0.1',
            port: cluster.port(MEASURED),
            path: '/notification/stream',
            headers: { cookie: cookies[i % users] ?? '', accept: 'text/event-stream' },
            agent: false,
          },
          (res) => {
            if (res.statusCode !== 200) {
              reject(new Error(`stream ${i}: HTTP ${res.statusCode}`));
              return;
            }
            res.setEncoding('utf8');
            const onData = (chunk: string) => {
              if (!chunk.includes('event: connected')) return;
              res.off('data', onData);
              res.resume();
              resolve();
            };
            res.on('data', onData);
          },
        );
        req.on('error', reject);
        requests.push(req);
      });
    const samples = [await sample(cluster, 0, MEASURED)];
    for (let at = 0; at < CONNECTIONS; at += STEP) {
      const n = Math.min(STEP, CONNECTIONS - at);
      await pool(n, CONNECT_CONCURRENCY, (i) => open(at + i));
      samples.push(await sample(cluster, at + n, MEASURED));
    }
    return samples;
  } finally {
    for (const req of requests) req.destroy();
    await db.end();
    await cluster.close();
  }
}

/** A guest chat socket that completes the handshake and then discards what it receives. */
function openChat(port: number, sockets: net.Socket[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(
        `GET /chat HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
          `Origin: ${CLUSTER_ORIGIN}\r\n\r\n`,
      );
    });
    sockets.push(socket);
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (!head.startsWith('HTTP/1.1 101')) reject(new Error(`upgrade refused: ${head.split('\r\n')[0]}`));
      else {
        socket.resume();
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

async function chatRun(): Promise<Sample[]> {
  const cluster = await startServer({ CHAT_MAX_CONNECTIONS_PER_IP: String(CONNECTIONS * 2) });
  const sockets: net.Socket[] = [];
  try {
    const samples = [await sample(cluster, 0)];
    for (let at = 0; at < CONNECTIONS; at += STEP) {
      const n = Math.min(STEP, CONNECTIONS - at);
      await pool(n, CONNECT_CONCURRENCY, () => openChat(cluster.port(0), sockets));
      samples.push(await sample(cluster, at + n));
    }
    return samples;
  } finally {
    for (const s of sockets) s.destroy();
    await cluster.close();
  }
}

async function main() {
  console.log(`${CONNECTIONS} idle connections per kind, sampled every ${STEP}; ${machineLoad()}`);
  if (KIND === 'sse' || KIND === 'both') report('SSE streams', await sseRun());
  if (KIND === 'chat' || KIND === 'both') report('chat sockets (guests)', await chatRun());
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
