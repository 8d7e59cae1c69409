// Overload behaviour: more load than the machine can serve. First the sustainable rate of a path is measured
// (closed loop, 100 connections: the successful responses per second), then a fixed-rate client offers
// `--factor` (default 4) times that rate for `--duration` seconds, with up to `--connections` requests in flight,
// while GET /health is polled twice a second. Printed: the share of fast 503 UNAVAILABLE (overloaded) answers, the latency of
// the 503s and of the successful responses, timeouts and errors, and what health said. With --compare-off the
// same offered load also runs against a second Herald with the guard off (OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0, OVERLOAD_MAX_DB_WAITING=0).
//
// Usage: npm run bench -- overload [--path /notification/list?limit=20&page=2] [--factor 4] [--duration 20]
//        [--connections 1000] [--timeout 10] [--compare-off] [--env KEY=VALUE,KEY=VALUE]
import autocannon from 'autocannon';
import pg from 'pg';
import { flagArg, machineLoad, numberArg, percentile, printTable, stringArg } from './_lib.js';
import {
  type BenchUser,
  createUser,
  SEED_NOTIFICATIONS_SQL,
  type ServerProcess,
  type Stack,
  startHerald,
  startStack,
} from './_server.js';

// A page past the first: the first page is served from the read cache, this one costs a PostgreSQL query.
const path = stringArg('path', '/notification/list?limit=20&page=2');
const factor = numberArg('factor', 4);
const duration = numberArg('duration', 20);
const connections = numberArg('connections', 1000);
const timeoutS = numberArg('timeout', 10);
const extraEnv = Object.fromEntries(
  stringArg('env', '')
    .split(',')
    .filter(Boolean)
    .map((kv) => kv.split('=', 2) as [string, string]),
);

async function sustainable(herald: ServerProcess, user: BenchUser): Promise<number> {
  const result = await autocannon({
    url: herald.url + path,
    headers: { cookie: user.cookie },
    connections: 100,
    duration: 10,
  });
  return Math.round(result['2xx'] / result.duration);
}

interface Outcome {
  byStatus: Map<number, number[]>;
  timeouts: number;
  errors: number;
  sent: number;
  health: Array<{ status: number; body: string; ms: number }>;
}

async function offer(herald: ServerProcess, user: BenchUser, rate: number): Promise<Outcome> {
  const byStatus = new Map<number, number[]>();
  const health: Outcome['health'] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const t = performance.now();
      try {
        const res = await fetch(`${herald.url}/health`, { signal: AbortSignal.timeout(timeoutS * 1000) });
        const body = (await res.json()) as { status: string; checks?: { load?: string } };
        health.push({
          status: res.status,
          body: `${body.status}${body.checks?.load ? `/${body.checks.load}` : ''}`,
          ms: performance.now() - t,
        });
      } catch {
        health.push({ status: 0, body: 'no answer', ms: performance.now() - t });
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: herald.url + path,
        headers: { cookie: user.cookie },
        connections,
        overallRate: rate,
        duration,
        timeout: timeoutS,
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      let list = byStatus.get(statusCode);
      if (!list) {
        list = [];
        byStatus.set(statusCode, list);
      }
      list.push(responseTime);
    });
  });
  polling = false;
  await poller;
  return { byStatus, timeouts: result.timeouts, errors: result.errors, sent: result.requests.sent, health };
}

function report(label: string, rate: number, o: Outcome) {
  const all = [...o.byStatus.values()].reduce((n, l) => n + l.length, 0);
  const rows = [...o.byStatus.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([status, times]) => {
      times.sort((a, b) => a - b);
      return {
        status,
        responses: times.length,
        'share %': Math.round((times.length / Math.max(1, all + o.timeouts)) * 1000) / 10,
        'per s': Math.round(times.length / duration),
        'p50 ms': Math.round(percentile(times, 50)),
        'p99 ms': Math.round(percentile(times, 99)),
        'max ms': Math.round(percentile(times, 100)),
      };
    });
  rows.push({
    status: 0,
    responses: o.timeouts,
    'share %': Math.round((o.timeouts / Math.max(1, all + o.timeouts)) * 1000) / 10,
    'per s': Math.round(o.timeouts / duration),
    'p50 ms': Number.NaN,
    'p99 ms': Number.NaN,
    'max ms': Number.NaN,
  });
  const healthSeen = new Map<string, number>();
  for (const h of o.health)
    healthSeen.set(`${h.status} ${h.body}`, (healthSeen.get(`${h.status} ${h.body}`) ?? 0) + 1);
  const healthMs = o.health.map((h) => h.ms).sort((a, b) => a - b);
  printTable(
    rows,
    `\n${label}: offered ${rate} req/s for ${duration} s (${o.sent} sent), up to ${connections} in flight, client timeout ${timeoutS} s (status 0 = timed out; errors ${o.errors})`,
  );
  console.log(
    `GET /health during the load: ${[...healthSeen.entries()].map(([k, n]) => `${k} ×${n}`).join(', ')}; p50 ${Math.round(percentile(healthMs, 50))} ms, max ${Math.round(percentile(healthMs, 100))} ms`,
  );
}

async function seed(stack: Stack, herald: ServerProcess): Promise<BenchUser> {
  const user = await createUser(herald.url, stack.smtp, 'overload');
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    await client.query(SEED_NOTIFICATIONS_SQL, [user.id, 1000]);
    await client.query('vacuum analyze notification');
  } finally {
    await client.end();
  }
  return user;
}

async function main() {
  const stack = await startStack();
  try {
    const herald = await startHerald(stack, { env: extraEnv, name: 'herald-guard' });
    let user: BenchUser;
    let rate: number;
    try {
      user = await seed(stack, herald);
      await sustainable(herald, user); // warm-up
      const sustained = await sustainable(herald, user);
      rate = Math.max(1, Math.round(sustained * factor));
      console.log(
        `${path}: sustainable ${sustained} req/s (closed loop, 100 connections, 10 s; ${machineLoad()}); offering ${factor}× = ${rate} req/s`,
      );
      report('guard on (defaults)', rate, await offer(herald, user, rate));
    } finally {
      await herald.stop();
    }
    if (flagArg('compare-off')) {
      const off = await startHerald(stack, {
        env: { ...extraEnv, OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', OVERLOAD_MAX_DB_WAITING: '0' },
        name: 'herald-noguard',
      });
      try {
        await sustainable(off, user); // warm-up
        report('guard off', rate, await offer(off, user, rate));
      } finally {
        await off.stop();
      }
    }
  } finally {
    await stack.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
