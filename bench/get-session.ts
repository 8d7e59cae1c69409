// `GET /auth/get-session` with a signed-in cookie (issue 27, target 1) next to a bare Fastify route answering the
// same JSON body from memory, Herald's own `/health`, and the same request sent through better-auth (the query
// `?disableCookieCache=true` makes the fast path step aside: the answer Herald gave before the fast path). The four
// loads alternate within each round, so every ratio compares figures taken under the same machine load.
//
// Usage: npm run bench -- get-session [--rounds 3] [--duration 8] [--warmup 3] [--connections 100]
//        npm run bench -- get-session --client-limits   # the per-client limits counting as by default (high
//            enough never to refuse) instead of off
//        npm run bench -- get-session --profile [--duration 8] [--profile-path /health]   # the fast path (or
//            another route) alone under --cpu-prof: top self-time functions and packages (bench/_profile.ts)
//        npm run bench -- get-session --against /tmp/base/server   # a second Herald from another tree's server/
//            (scripts/bench-worktree.sh) on the same stack, its loads alternating with this tree's in every round:
//            a before/after pair under the same machine load, which separate runs on this VM are not
import autocannon from 'autocannon';
import {
  clientLimitsEnv,
  cpuSecondsOfPort,
  flagArg,
  machineLoad,
  numberArg,
  printTable,
  stringArg,
} from './_lib.js';
import { profileLoad } from './_profile.js';
import { createUser, scratchDir, startBaseline, startHerald, startStack } from './_server.js';

const rounds = numberArg('rounds', 3);
const duration = numberArg('duration', 8);
const warmup = numberArg('warmup', 3);
const connections = numberArg('connections', 100);
const profile = flagArg('profile');
// --profile-path /health: profile another route with the same cookie (what the per-request pipeline costs alone).
const profilePath = stringArg('profile-path', '/auth/get-session');
const profileDir = profile ? scratchDir('herald-get-session-prof-') : '';
const against = stringArg('against', '');

interface Load {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  /** Server CPU time per request (µs): unlike req/s, hardly moved by other jobs competing for the cores. */
  cpuUs: number;
}

async function load(url: string, cookie: string | undefined, seconds: number): Promise<Load> {
  const port = Number(new URL(url).port);
  const cpuBefore = cpuSecondsOfPort(port);
  const result = await autocannon({
    url,
    headers: cookie ? { cookie } : {},
    connections,
    duration: seconds,
  });
  // Successful responses only: a refused request is not throughput.
  return {
    rps: Math.round(result['2xx'] / result.duration),
    p50: result.latency.p50,
    p99: result.latency.p99,
    bad: result.non2xx + result.errors + result.timeouts,
    cpuUs: Math.round(((cpuSecondsOfPort(port) - cpuBefore) * 1e6) / Math.max(1, result.requests.total)),
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;

async function main() {
  const stack = await startStack();
  try {
    const herald = await startHerald(stack, {
      env: clientLimitsEnv(),
      ...(profile ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`], name: 'herald-prof' } : {}),
    });
    const user = await createUser(herald.url, stack.smtp, 'session');
    const probe = await fetch(`${herald.url}/auth/get-session`, { headers: { cookie: user.cookie } });
    if (probe.status !== 200) throw new Error(`get-session: ${probe.status} ${await probe.text()}`);
    if (!probe.headers.getSetCookie().some((c) => c.startsWith('better-auth.session_data='))) {
      throw new Error('get-session did not re-issue the snapshot cookie');
    }
    const body: unknown = await probe.json();
    if (profile) {
      const url = `${herald.url}${profilePath}`;
      try {
        await load(url, user.cookie, warmup);
        await profileLoad(herald, profileDir, async () => {
          const r = await load(url, user.cookie, duration);
          return `${profilePath}: ${r.rps} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms (${machineLoad()})`;
        });
      } finally {
        await herald.stop();
      }
      return;
    }
    const baseline = await startBaseline(stack, { '/health': { status: 'ok' }, '/auth/get-session': body });
    const other = against
      ? await startHerald(stack, { env: clientLimitsEnv(), serverDir: against, name: 'herald-against' })
      : undefined;
    const loads = [
      {
        name: 'Herald GET /auth/get-session (fast path)',
        url: `${herald.url}/auth/get-session`,
        cookie: user.cookie,
      },
      {
        name: 'bare Fastify GET /auth/get-session',
        url: `${baseline.url}/auth/get-session`,
        cookie: user.cookie,
      },
      { name: 'Herald GET /health', url: `${herald.url}/health`, cookie: undefined },
      // Calibration: Herald's own route behind the guard (the same session read, plus the count's read).
      {
        name: 'Herald GET /notification/unread-count',
        url: `${herald.url}/notification/unread-count`,
        cookie: user.cookie,
      },
      {
        name: 'Herald via better-auth (?disableCookieCache=true)',
        url: `${herald.url}/auth/get-session?disableCookieCache=true`,
        cookie: user.cookie,
      },
      // The same three Herald loads on the other tree's server (--against), after this tree's in every round.
      ...(other
        ? [
            {
              name: `against: GET /auth/get-session (fast path)`,
              url: `${other.url}/auth/get-session`,
              cookie: user.cookie,
            },
            { name: 'against: GET /health', url: `${other.url}/health`, cookie: undefined },
            {
              name: 'against: GET /notification/unread-count',
              url: `${other.url}/notification/unread-count`,
              cookie: user.cookie,
            },
          ]
        : []),
    ];
    try {
      if (other) console.log(`against: ${against} (pid ${other.pid}, log ${other.logFile})`);
      console.log(`Herald pid ${herald.pid} (log ${herald.logFile}), baseline pid ${baseline.pid}`);
      for (const l of loads) await load(l.url, l.cookie, warmup);
      const results: Load[][] = loads.map(() => []);
      for (let round = 1; round <= rounds; round++) {
        const before = machineLoad();
        const rows = [];
        for (const [i, l] of loads.entries()) {
          const r = await load(l.url, l.cookie, duration);
          results[i]?.push(r);
          rows.push({
            load: l.name,
            'req/s': r.rps,
            'p50 ms': r.p50,
            'p99 ms': r.p99,
            'server CPU µs/req': r.cpuUs,
            'non-2xx/err': r.bad,
          });
        }
        const [fast, bare, health, , slow] = rows.map((r) => r['req/s']) as [
          number,
          number,
          number,
          number,
          number,
        ];
        console.log(`\nround ${round}/${rounds}: ${connections} connections, ${duration} s per load`);
        console.log(`before: ${before}`);
        printTable(rows, 'after:');
        console.log(
          `get-session / bare route ${ratio(fast, bare)}, / health ${ratio(fast, health)}, / better-auth path ${ratio(fast, slow)}`,
        );
      }
      const med = results.map((rs) => ({
        rps: median(rs.map((r) => r.rps)),
        p99: median(rs.map((r) => r.p99)),
        cpuUs: median(rs.map((r) => r.cpuUs)),
      }));
      type Median = { rps: number; p99: number; cpuUs: number };
      const [fast, bare, health, , slow] = med as [Median, Median, Median, Median, Median];
      console.log(`\nmedian of ${rounds} rounds (${machineLoad()})`);
      console.table(
        loads.map((l, i) => ({
          load: l.name,
          'req/s': med[i]?.rps,
          'p99 ms': med[i]?.p99,
          'server CPU µs/req': med[i]?.cpuUs,
        })),
      );
      console.log(
        `get-session fast path: ${ratio(fast.rps, bare.rps)} × the bare route, ${ratio(fast.rps, health.rps)} × /health, ${ratio(fast.rps, slow.rps)} × the better-auth path`,
      );
      console.log(
        `server CPU per request: fast path ${fast.cpuUs} µs, bare route ${bare.cpuUs} µs, /health ${health.cpuUs} µs, better-auth path ${slow.cpuUs} µs`,
      );
      if (other) {
        const [oFast, oHealth, oUnread] = med.slice(5) as [Median, Median, Median];
        const unread = med[3] as Median;
        console.log(
          `against (${against}): fast path ${ratio(oFast.rps, bare.rps)} × the bare route, ${oFast.cpuUs} µs per request (this tree ${fast.cpuUs}); /health ${oHealth.cpuUs} µs (${health.cpuUs}); unread-count ${oUnread.rps} req/s, ${oUnread.cpuUs} µs (${unread.rps}, ${unread.cpuUs})`,
        );
      }
    } finally {
      await other?.stop();
      await baseline.stop();
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
