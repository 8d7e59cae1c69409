// Noisy neighbour (issue 22): one verified user keeps `--hog` (default 250) requests in flight on
// GET /notification/list?search=order&limit=5 (a search: never cached and never sharing a statement, so every
// request is a database statement of its own; the counts this used until 2026-11-28 are now served from the read
// cache, and a plain page is read once for all equal requests queued together) from one address while `--others` (default 50) other users, each from its own address,
// poll the same route every `--interval` ms, and GET /health is polled twice a second, for `--duration` seconds.
// Printed: the others' success rate and latency, what the hog got, and what /health answered. Client addresses
// come from X-Forwarded-For with TRUST_PROXY=true (every benchmark connection is from 127.0.0.1). With
// --compare-off the same run repeats with the per-client limits off (CLIENT_*=0), as before the fix.
//
// Usage: npm run bench -- noisy-neighbour [--hog 250] [--others 50] [--interval 500] [--duration 20]
//        [--compare-off] [--env KEY=VALUE,KEY=VALUE]
import http from 'node:http';
import pg from 'pg';
import { flagArg, machineLoad, numberArg, percentile, printTable, stringArg } from './_lib.js';
import {
  type BenchUser,
  createUser,
  SEED_NOTIFICATIONS_SQL,
  type Stack,
  startHerald,
  startStack,
} from './_server.js';

const hogInFlight = numberArg('hog', 250);
const othersCount = numberArg('others', 50);
const intervalMs = numberArg('interval', 500);
const duration = numberArg('duration', 20);
const extraEnv = Object.fromEntries(
  stringArg('env', '')
    .split(',')
    .filter(Boolean)
    .map((kv) => kv.split('=', 2) as [string, string]),
);
const PATH = '/notification/list?search=order&limit=5';
// One pool per side, so the hog's connections never queue the others' requests inside this client.
const hogAgent = new http.Agent({ keepAlive: true, maxSockets: hogInFlight + 10 });
const othersAgent = new http.Agent({ keepAlive: true, maxSockets: othersCount * 2 + 10 });

interface Run {
  others: Array<{ status: number; ms: number }>;
  hog: Map<number, number>;
  health: Map<string, number>;
}

function call(
  base: string,
  user: BenchUser,
  address: string,
  agent: http.Agent,
): Promise<{ status: number; ms: number }> {
  const t = performance.now();
  return new Promise((resolve) => {
    const req = http.get(
      base + PATH,
      { agent, headers: { cookie: user.cookie, 'x-forwarded-for': address }, timeout: 10_000 },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t }));
        res.on('error', () => resolve({ status: 0, ms: performance.now() - t }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, ms: performance.now() - t }));
  });
}

/** Every other user polls once (sessions resolved, connections open, JIT warm) before anything is measured. */
async function warmUp(base: string, others: BenchUser[]): Promise<void> {
  for (let round = 0; round < 3; round++) {
    await Promise.all(others.map((u, i) => call(base, u, `203.0.113.${(i % 250) + 1}`, othersAgent)));
  }
}

async function run(base: string, hog: BenchUser, others: BenchUser[]): Promise<Run> {
  await warmUp(base, others);
  const until = performance.now() + duration * 1000;
  const result: Run = { others: [], hog: new Map(), health: new Map() };
  const hogWorkers = Array.from({ length: hogInFlight }, async () => {
    while (performance.now() < until) {
      const r = await call(base, hog, '198.51.100.1', hogAgent);
      result.hog.set(r.status, (result.hog.get(r.status) ?? 0) + 1);
    }
  });
  const pollers = others.map(async (user, i) => {
    // Spread the first polls over one interval.
    await new Promise((r) => setTimeout(r, (intervalMs * i) / others.length));
    while (performance.now() < until) {
      const started = performance.now();
      result.others.push(await call(base, user, `203.0.113.${(i % 250) + 1}`, othersAgent));
      await new Promise((r) => setTimeout(r, Math.max(0, intervalMs - (performance.now() - started))));
    }
  });
  const health = (async () => {
    while (performance.now() < until) {
      let key: string;
      try {
        const res = await fetch(`${base}/health`, { signal: AbortSignal.timeout(5_000) });
        const body = (await res.json()) as { status: string; checks?: { load?: string } };
        key = `${res.status} ${body.status}${body.checks?.load ? `/${body.checks.load}` : ''}`;
      } catch {
        key = 'no answer';
      }
      result.health.set(key, (result.health.get(key) ?? 0) + 1);
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  await Promise.all([...hogWorkers, ...pollers, health]);
  return result;
}

function report(label: string, r: Run) {
  const ok = r.others.filter((o) => o.status === 200);
  const times = r.others.map((o) => o.ms).sort((a, b) => a - b);
  const okTimes = ok.map((o) => o.ms).sort((a, b) => a - b);
  const otherStatuses = new Map<number, number>();
  for (const o of r.others) otherStatuses.set(o.status, (otherStatuses.get(o.status) ?? 0) + 1);
  const hogTotal = [...r.hog.values()].reduce((a, b) => a + b, 0);
  printTable(
    {
      'others: requests': r.others.length,
      'others: success %': Math.round((ok.length / Math.max(1, r.others.length)) * 10000) / 100,
      'others: statuses': [...otherStatuses.entries()].map(([s, n]) => `${s}×${n}`).join(' '),
      'others: p50 ms (all)': Math.round(percentile(times, 50)),
      'others: p99 ms (all)': Math.round(percentile(times, 99)),
      'others: p99 ms (200s)': Math.round(percentile(okTimes, 99)),
      'hog: responses': hogTotal,
      'hog: statuses': [...r.hog.entries()].map(([s, n]) => `${s}×${n}`).join(' '),
      '/health': [...r.health.entries()].map(([k, n]) => `${k} ×${n}`).join(', '),
    },
    `\n${label}: hog ${hogInFlight} in flight, ${othersCount} others every ${intervalMs} ms, ${duration} s (${machineLoad()})`,
  );
}

async function seed(stack: Stack, base: string): Promise<{ hog: BenchUser; others: BenchUser[] }> {
  const hog = await createUser(base, stack.smtp, 'hog');
  const others: BenchUser[] = [];
  for (let i = 0; i < othersCount; i += 10) {
    others.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(10, othersCount - i) }, () => createUser(base, stack.smtp, 'other')),
      )),
    );
  }
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    for (const u of [hog, ...others.slice(0, 5)]) await client.query(SEED_NOTIFICATIONS_SQL, [u.id, 1000]);
    await client.query('vacuum analyze notification');
  } finally {
    await client.end();
  }
  return { hog, others };
}

async function main() {
  const stack = await startStack();
  try {
    const env = { TRUST_PROXY: 'true', ...extraEnv };
    const herald = await startHerald(stack, { env, name: 'herald-limits' });
    let users: { hog: BenchUser; others: BenchUser[] };
    try {
      users = await seed(stack, herald.url);
      report('per-client limits on (defaults)', await run(herald.url, users.hog, users.others));
    } finally {
      await herald.stop();
    }
    if (flagArg('compare-off')) {
      const off = await startHerald(stack, {
        env: {
          ...env,
          CLIENT_MAX_IN_FLIGHT: '0',
          CLIENT_MAX_IN_FLIGHT_PER_IP: '0',
          CLIENT_RATE_LIMIT_PER_SECOND: '0',
          CLIENT_RATE_LIMIT_PER_SECOND_PER_IP: '0',
        },
        name: 'herald-nolimits',
      });
      try {
        report('per-client limits off (as before issue 22)', await run(off.url, users.hog, users.others));
      } finally {
        await off.stop();
      }
    }
  } finally {
    await stack.close();
    hogAgent.destroy();
    othersAgent.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
