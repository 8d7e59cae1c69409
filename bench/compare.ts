// Herald against a bare Fastify baseline on the same machine, in one run: the HTTP hot paths (health,
// unread-count, list?limit=20 with 1,000 notifications, get-session) loaded with the same client (autocannon),
// the same connections and duration, back to back (Herald, then the baseline, per path). The baseline returns the
// very JSON bodies Herald returned, from memory. Ratios within one run are the figures that count: the machine
// is shared, so absolute numbers drift with its load (printed with every table).
//
// Usage: npm run bench -- compare [--runs 1] [--duration 10] [--warmup 3] [--connections 100] [--only health,list]
//        npm run bench -- compare --client-limits   # the per-client limits counting as by default (too high to
//            refuse one user at full speed) instead of off: what a deployment's bookkeeping costs
//        npm run bench -- compare --profile [--duration 10]   # one Herald process per path under node
//            --cpu-prof; prints each path's top self-time functions and packages (bench/_profile.ts)
import { readdirSync } from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { clientLimitsEnv, flagArg, machineLoad, numberArg, printTable, stringArg } from './_lib.js';
import { printProfileSummary, type Window } from './_profile.js';
import {
  type BenchUser,
  createUser,
  SEED_NOTIFICATIONS_SQL,
  type ServerProcess,
  type Stack,
  scratchDir,
  startBaseline,
  startHerald,
  startStack,
} from './_server.js';

const runs = numberArg('runs', 1);
const duration = numberArg('duration', 10);
const warmup = numberArg('warmup', 3);
const connections = numberArg('connections', 100);
const profile = flagArg('profile');
const limitsEnv = clientLimitsEnv();
// A comma-separated subset of the paths by a word of their name (e.g. `--only health,list`); all by default.
const only = stringArg('only', '');

interface HotPath {
  name: string;
  path: string;
  /** The session cookie is sent. */
  authed: boolean;
}

const ALL_PATHS: HotPath[] = [
  { name: 'GET /health', path: '/health', authed: false },
  { name: 'GET /notification/unread-count', path: '/notification/unread-count', authed: true },
  { name: 'GET /notification/list?limit=20', path: '/notification/list?limit=20', authed: true },
  { name: 'GET /auth/get-session', path: '/auth/get-session', authed: true },
];
const PATHS = only
  ? ALL_PATHS.filter((p) => only.split(',').some((word) => word && p.path.includes(word.trim())))
  : ALL_PATHS;

interface Load {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function load(base: string, p: HotPath, user: BenchUser, seconds: number): Promise<Load> {
  const result = await autocannon({
    url: base + p.path,
    headers: p.authed ? { cookie: user.cookie } : {},
    connections,
    duration: seconds,
  });
  // Successful responses only: a refused request (503 from the overload guard) is not throughput.
  return {
    rps: Math.round(result['2xx'] / result.duration),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

async function seed(stack: Stack, herald: ServerProcess): Promise<BenchUser> {
  const user = await createUser(herald.url, stack.smtp, 'list');
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

/** The bodies Herald answers, for the baseline to return; also checks every path answers 200. */
async function bodiesOf(herald: ServerProcess, user: BenchUser): Promise<Record<string, unknown>> {
  // /health always: the baseline's readiness is awaited on it, whatever `--only` selected.
  const bodies: Record<string, unknown> = { '/health': { status: 'ok' } };
  for (const p of PATHS) {
    const res = await fetch(herald.url + p.path, { headers: p.authed ? { cookie: user.cookie } : {} });
    if (res.status !== 200) throw new Error(`${p.path}: ${res.status} ${await res.text()}`);
    bodies[p.path.split('?')[0] ?? p.path] = await res.json();
  }
  return bodies;
}

async function compare(stack: Stack) {
  const herald = await startHerald(stack, { env: limitsEnv });
  const user = await seed(stack, herald);
  const baseline = await startBaseline(stack, await bodiesOf(herald, user));
  try {
    console.log(`Herald pid ${herald.pid} (log ${herald.logFile}), baseline pid ${baseline.pid}`);
    console.log(`warm-up: ${warmup} s per path and server`);
    for (const p of PATHS) {
      await load(herald.url, p, user, warmup);
      await load(baseline.url, p, user, warmup);
    }
    for (let run = 1; run <= runs; run++) {
      const before = machineLoad();
      const rows = [];
      for (const p of PATHS) {
        const h = await load(herald.url, p, user, duration);
        const b = await load(baseline.url, p, user, duration);
        rows.push({
          path: p.name,
          'Herald req/s': h.rps,
          'p50 ms': h.p50,
          'p99 ms': h.p99,
          'baseline req/s': b.rps,
          'base p50': b.p50,
          'base p99': b.p99,
          ratio: Math.round((h.rps / b.rps) * 100) / 100,
          'non-2xx/err': `${h.non2xx}/${h.errors} | ${b.non2xx}/${b.errors}`,
        });
      }
      console.log(`\nrun ${run}/${runs}: ${connections} connections, ${duration} s per path and server`);
      console.log(`before: ${before}`);
      printTable(rows, 'after:');
    }
  } finally {
    await baseline.stop();
    await herald.stop();
  }
}

/** One Herald process per path under --cpu-prof: warm-up, the measured load, stop; then the summary. */
async function profileEach(stack: Stack) {
  const dir = scratchDir('herald-cpuprof-');
  let user: BenchUser | undefined;
  for (const p of PATHS) {
    let window: Window | undefined;
    const sub = path.join(dir, p.path.replace(/\W+/g, '_'));
    const herald = await startHerald(stack, {
      env: limitsEnv,
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${sub}`],
      name: 'herald-prof',
    });
    try {
      user ??= await seed(stack, herald);
      await load(herald.url, p, user, warmup);
      const fromUs = Number(process.hrtime.bigint() / 1000n);
      const h = await load(herald.url, p, user, duration);
      window = { fromUs, toUs: Number(process.hrtime.bigint() / 1000n) };
      console.log(`\n## ${p.name}: ${h.rps} req/s, p50 ${h.p50} ms, p99 ${h.p99} ms (${machineLoad()})`);
    } finally {
      await herald.stop();
    }
    const file = readdirSync(sub).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`no profile written in ${sub}`);
    printProfileSummary(path.join(sub, file), 20, window);
  }
  console.log(`\nprofiles kept in ${dir}`);
}

async function main() {
  const stack = await startStack();
  try {
    if (profile) await profileEach(stack);
    else await compare(stack);
  } finally {
    await stack.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
