// Small helpers shared by the benchmarks (argument parsing, percentiles, server memory, the machine's load).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLUSTER_ORIGIN } from '@herald/server/testkit';

const argv = process.argv.slice(2);

/** `--name <number>` from the command line, or the fallback. */
export function numberArg(name: string, fallback: number): number {
  const i = argv.indexOf(`--${name}`);
  const value = i >= 0 ? Number(argv[i + 1]) : Number.NaN;
  return Number.isFinite(value) ? value : fallback;
}

/** `--name <text>` from the command line, or the fallback. */
export function stringArg(name: string, fallback: string): string {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? (argv[i + 1] ?? fallback) : fallback;
}

/** `--name` present on the command line. */
export function flagArg(name: string): boolean {
  return argv.includes(`--${name}`);
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

function pidOfPort(port: number): string | undefined {
  const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
  return out.match(/pid=(\d+)/)?.[1];
}

/** Resident memory (KiB) of the process listening on `port`, or NaN when it cannot be read (Linux only). */
export function rssOfPort(port: number): number {
  try {
    const status = readFileSync(`/proc/${pidOfPort(port)}/status`, 'utf8');
    return Number(status.match(/VmRSS:\s+(\d+)/)?.[1]);
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU seconds (user + system) the process listening on `port` has used so far, or NaN (Linux only): the difference
 * of two readings says how much of the 2 cores a server took during a run.
 */
export function cpuSecondsOfPort(port: number): number {
  try {
    const stat = readFileSync(`/proc/${pidOfPort(port)}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU seconds (user + system) of every process named `name` on the machine (e.g. `postgres`: the postmaster and
 * all its backends), or 0 when none can be read (Linux only). A process that exits takes its own figures with it,
 * but its parent's "waited-for children" figures (cutime, cstime) gain them once it is reaped, so they are counted
 * too: a backend or autovacuum worker that ends during a load no longer makes the difference of two readings
 * negative (list-scale printed -141 µs per request for the counts right after its seed).
 */
export function cpuSecondsOfProcesses(name: string): number {
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== name) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime, cutime, cstime: the 14th to 17th fields.
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    } catch {
      // Exited meanwhile.
    }
  }
  return ticks / 100;
}

/**
 * Bytes the process listening on `port` has passed to write()/writev() so far (`wchar`: its sockets, the database
 * and store connections included), or NaN (Linux only): the difference of two readings is what a run wrote.
 */
export function writtenBytesOfPort(port: number): number {
  try {
    const io = readFileSync(`/proc/${pidOfPort(port)}/io`, 'utf8');
    return Number(io.match(/wchar:\s+(\d+)/)?.[1]);
  } catch {
    return Number.NaN;
  }
}

/**
 * Every benchmark client connects from 127.0.0.1, so the per-address caps that protect a real deployment (HTTP
 * connections, SSE streams and stream opens per client IP) would refuse the load itself: lift them.
 */
export const ONE_ADDRESS_LIMITS: Record<string, string> = {
  HTTP_MAX_CONNECTIONS_PER_IP: '0',
  SSE_MAX_STREAMS_PER_IP: '1000000',
  SSE_OPEN_RATE_LIMIT: '1000000',
};

/**
 * The per-client limits off (http/client-limits.ts; 100 req/s per user by default): a hot-path benchmark drives one
 * user from 100 connections, which they would refuse almost entirely. They protect many real clients from one;
 * the path's own cost is what these benchmarks measure.
 */
export const NO_CLIENT_LIMITS: Record<string, string> = {
  CLIENT_MAX_IN_FLIGHT: '0',
  CLIENT_MAX_IN_FLIGHT_PER_IP: '0',
  CLIENT_RATE_LIMIT_PER_SECOND: '0',
  CLIENT_RATE_LIMIT_PER_SECOND_PER_IP: '0',
};

/**
 * The per-client limits on, as by default (every request counted in the shared store: one INCR per identity), but
 * too high to refuse one user driven at full speed: what the default configuration's bookkeeping costs.
 */
export const COUNTING_CLIENT_LIMITS: Record<string, string> = {
  CLIENT_MAX_IN_FLIGHT: '1000000',
  CLIENT_MAX_IN_FLIGHT_PER_IP: '1000000',
  CLIENT_RATE_LIMIT_PER_SECOND: '1000000000',
  CLIENT_RATE_LIMIT_PER_SECOND_PER_IP: '1000000000',
};

/** The per-client limits a benchmark starts Herald with: counting (`--client-limits`), else off. */
export function clientLimitsEnv(): Record<string, string> {
  return flagArg('client-limits') ? COUNTING_CLIENT_LIMITS : NO_CLIENT_LIMITS;
}

/**
 * The production liveness timings (config.ts defaults). The cluster harness shrinks them for tests (an instance
 * is dead after 3 s without a heartbeat); on a saturated machine a scale benchmark would then watch instances
 * declare each other dead mid-run instead of measuring fan-out.
 */
export const PRODUCTION_LIVENESS: Record<string, string> = {
  HEARTBEAT_INTERVAL_MS: '10000',
  REGISTRY_TTL_MS: '30000',
  DEAD_INSTANCE_MS: '45000',
};

/** Signs in through the real endpoint and returns the Cookie header value of the session. */
export async function signIn(base: string, email: string, password: string): Promise<string> {
  const res = await fetch(`${base}/auth/sign-in/email`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN },
    body: JSON.stringify({ email, password }),
  });
  if (res.status !== 200) throw new Error(`sign-in ${email} failed: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  const cookie = res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] ?? '')
    .filter((c) => c && !c.endsWith('='))
    .join('; ');
  if (!cookie.includes('session_token=')) throw new Error('sign-in response set no session cookie');
  return cookie;
}

/**
 * The machine's load as printed with every table: the machine is shared (other jobs, the load generator itself),
 * so an absolute figure means little without it; ratios measured within one run are what compare. The I/O
 * pressure goes with it where the kernel reports it: a commit waits for its fsync, and disk stalls on this VM
 * (issue 27's notes) moved chat and broadcast figures by as much as a busy CPU did, with the load average calm.
 */
export function machineLoad(): string {
  const [one = 0, five = 0, fifteen = 0] = loadavg();
  const io = ioPressure();
  return `load average ${one.toFixed(2)} / ${five.toFixed(2)} / ${fifteen.toFixed(2)} (1 / 5 / 15 min)${io ? `, ${io}` : ''}, ${availableParallelism()} cores (${cpus()[0]?.model ?? 'unknown cpu'})`;
}

/**
 * `/proc/pressure/io` as "I/O stalled x % / y %": the share of the last 10 s / 60 s in which some task waited on
 * I/O (`some avg10`, `avg60`). Null where the kernel has no pressure stall information.
 */
export function ioPressure(): string | null {
  try {
    const some = readFileSync('/proc/pressure/io', 'utf8')
      .split('\n')
      .find((line) => line.startsWith('some '));
    const field = (name: string) => some?.match(new RegExp(`${name}=([0-9.]+)`))?.[1];
    const avg10 = field('avg10');
    const avg60 = field('avg60');
    return avg10 && avg60 ? `I/O stalled ${avg10} % / ${avg60} % (10 / 60 s)` : null;
  } catch {
    return null;
  }
}

/**
 * The server code a benchmark measures: the workspace `@herald/server` resolves to (the testkit starts that
 * folder's `src/server.ts`) and its commit. A second worktree for an A/B pair must link `@herald/server` to its own
 * `server/` (scripts/bench-worktree.sh): with the first tree's node_modules linked in whole, it measured the first
 * tree's code.
 */
export function serverUnderTest(): string {
  const dir = path.resolve(
    path.dirname(fileURLToPath(import.meta.resolve('@herald/server/testkit'))),
    '../..',
  );
  try {
    const rev = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['-C', dir, 'status', '--porcelain', '--', '.'], {
      encoding: 'utf8',
    }).trim();
    return `server code: ${dir} at ${rev}${dirty ? ' with uncommitted changes' : ''}`;
  } catch {
    return `server code: ${dir}`;
  }
}

/** console.table with the machine's load on the line above it (every benchmark prints its tables this way). */
export function printTable(rows: unknown[] | Record<string, unknown>, title?: string): void {
  if (title) console.log(title);
  console.log(`${machineLoad()}; ${serverUnderTest()}`);
  console.table(rows);
}
