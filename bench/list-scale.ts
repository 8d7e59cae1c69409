// Uncached notification list pages on a production-sized table over HTTP (issue 27, target 2): one Herald process
// as production runs it (NODE_ENV=production), 500,000 notification rows interleaved over 5,000 users with the
// measured user holding 1,000 of their own, and 100 keep-alive connections (autocannon) on one signed-in user.
// Page 2 is never cached (only first pages are), so every request reads PostgreSQL: the figure the issue compares
// with the reference's 0.71–0.97k req/s. Prints req/s, p50/p99 and the CPU per request of Herald and of PostgreSQL.
//
// Usage: npm run bench -- list-scale [--rows 500000] [--users 5000] [--rounds 2] [--duration 8] [--warmup 3]
//        [--connections 100] [--signed-in 1] [--client-limits]
//        --client-limits: the per-client limits on, as by default, but too high to refuse (bench/_lib.ts)
//        --signed-in N: N signed-in users, each holding 1,000 rows, the requests spread round-robin over them (with
//            one user every page in flight is the same one; with 100, nearly every page is another user's)
//        npm run bench -- list-scale --profile [--path '/notification/list?limit=20&page=2']   # that path alone
//            under --cpu-prof: top self-time functions and packages (bench/_profile.ts)
//        npm run bench -- list-scale --against /tmp/base/server   # another tree's server/ on the same stack and
//            data, each load run on it right after this tree's (a before/after pair under the same machine load)
import autocannon from 'autocannon';
import {
  clientLimitsEnv,
  cpuSecondsOfPort,
  cpuSecondsOfProcesses,
  flagArg,
  machineLoad,
  numberArg,
  printTable,
  stringArg,
} from './_lib.js';
import { profileLoad } from './_profile.js';
import { seedAtScale } from './_seed.js';
import { createUser, scratchDir, startHerald, startStack } from './_server.js';

const ROWS = numberArg('rows', 500_000);
const USERS = numberArg('users', 5_000);
const rounds = numberArg('rounds', 2);
const duration = numberArg('duration', 8);
const warmup = numberArg('warmup', 3);
const connections = numberArg('connections', 100);
const signedIn = numberArg('signed-in', 1);
const profile = flagArg('profile');
const profilePath = stringArg('path', '/notification/list?limit=20&page=2');
const against = stringArg('against', '');
/** The reference's uncached page 2 in the side-by-side runs (req/s, low and high). */
const REFERENCE_PAGE2 = [710, 970] as const;

const PATHS = [
  { name: 'list page 2 (uncached)', path: '/notification/list?limit=20&page=2' },
  { name: 'list page 50, the last (uncached)', path: '/notification/list?limit=20&page=50' },
  { name: 'unread page 2 (uncached)', path: '/notification/list?limit=20&page=2&filter=unread' },
  { name: 'list page 1 (cached)', path: '/notification/list?limit=20' },
  { name: 'counts (read cache)', path: '/notification/counts' },
];

interface Load {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  heraldUs: number;
  pgUs: number;
}

async function load(url: string, cookies: string[], seconds: number): Promise<Load> {
  const port = Number(new URL(url).port);
  const herald0 = cpuSecondsOfPort(port);
  const pg0 = cpuSecondsOfProcesses('postgres');
  const { pathname, search } = new URL(url);
  let next = 0;
  const r = await autocannon({
    url,
    connections,
    duration: seconds,
    // One user: a fixed header (a per-request setup costs the client CPU on these shared cores). Several: each
    // request as the next user in turn.
    ...(cookies.length === 1
      ? { headers: { cookie: cookies[0] ?? '' } }
      : {
          requests: [
            {
              method: 'GET',
              path: pathname + search,
              setupRequest: (req: autocannon.Request) => ({
                ...req,
                headers: { ...req.headers, cookie: cookies[next++ % cookies.length] ?? '' },
              }),
            },
          ],
        }),
  });
  const per = (s: number) => Math.round((s * 1e6) / Math.max(1, r.requests.total));
  return {
    rps: Math.round(r['2xx'] / r.duration),
    p50: r.latency.p50,
    p99: r.latency.p99,
    bad: r.non2xx + r.errors + r.timeouts,
    heraldUs: per(cpuSecondsOfPort(port) - herald0),
    pgUs: per(cpuSecondsOfProcesses('postgres') - pg0),
  };
}

async function main() {
  const stack = await startStack();
  const profileDir = profile ? scratchDir('herald-list-scale-prof-') : '';
  try {
    const herald = await startHerald(stack, {
      env: clientLimitsEnv(),
      ...(profile ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`], name: 'herald-prof' } : {}),
    });
    try {
      const users = [];
      for (let i = 0; i < signedIn; i++) users.push(await createUser(herald.url, stack.smtp, 'list'));
      const [user] = users;
      if (!user) throw new Error('--signed-in must be at least 1');
      const cookies = users.map((u) => u.cookie);
      const t0 = Date.now();
      await seedAtScale(
        stack.db.url,
        users.map((u) => u.id),
        { rows: ROWS, users: USERS },
      );
      console.log(
        `seeded ${ROWS.toLocaleString('en')} rows over ${USERS.toLocaleString('en')} users in ${Math.round((Date.now() - t0) / 1000)} s; Herald pid ${herald.pid} (log ${herald.logFile})`,
      );
      for (const p of PATHS) {
        const res = await fetch(herald.url + p.path, { headers: { cookie: user.cookie } });
        const body = (await res.json()) as { pagination?: unknown; notifications?: unknown[] };
        if (res.status !== 200) throw new Error(`${p.path}: ${res.status} ${JSON.stringify(body)}`);
        if (
          p.path.includes('list') &&
          !(body.notifications?.length === 20 && body.pagination !== undefined)
        ) {
          throw new Error(`${p.path}: expected a full page of 20, got ${JSON.stringify(body).slice(0, 200)}`);
        }
      }
      const other = against
        ? await startHerald(stack, { env: clientLimitsEnv(), serverDir: against, name: 'herald-against' })
        : undefined;
      if (other) console.log(`against: ${against} (pid ${other.pid}, log ${other.logFile})`);
      // This tree's server, then the other one's (--against), for every load.
      const servers = other ? [herald, other] : [herald];
      if (profile) {
        const url = herald.url + profilePath;
        await load(url, cookies, warmup);
        await profileLoad(herald, profileDir, async () => {
          const r = await load(url, cookies, duration);
          return `${profilePath}: ${r.rps} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms (${machineLoad()})`;
        });
        return;
      }
      for (const server of servers) for (const p of PATHS) await load(server.url + p.path, cookies, warmup);
      for (let round = 1; round <= rounds; round++) {
        const before = machineLoad();
        const rows = [];
        for (const p of PATHS) {
          for (const server of servers) {
            const r = await load(server.url + p.path, cookies, duration);
            rows.push({
              load: server === herald ? p.name : `against: ${p.name}`,
              'req/s': r.rps,
              'p50 ms': r.p50,
              'p99 ms': r.p99,
              'Herald CPU µs/req': r.heraldUs,
              'PostgreSQL CPU µs/req': r.pgUs,
              'non-2xx/err': r.bad,
            });
          }
        }
        console.log(
          `\nround ${round}/${rounds}: ${connections} connections over ${signedIn} signed-in user(s), ${duration} s per load`,
        );
        console.log(`before: ${before}`);
        printTable(rows, 'after:');
        const page2 = rows[0]?.['req/s'] ?? 0;
        console.log(
          `page 2 against the reference's ${REFERENCE_PAGE2[0]}–${REFERENCE_PAGE2[1]} req/s: ` +
            `${(page2 / REFERENCE_PAGE2[1]).toFixed(1)}–${(page2 / REFERENCE_PAGE2[0]).toFixed(1)}×`,
        );
      }
      await other?.stop();
    } finally {
      await herald.stop();
    }
  } finally {
    await stack.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
