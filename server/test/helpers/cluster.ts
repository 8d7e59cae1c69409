// Multi-instance harness: N real server processes (`node --import tsx src/server.ts`, cwd server/) on free
// loopback ports, sharing one fresh test database, one in-process SMTP capture and a private redis-server on a
// free port (so a test can stop and restart the store). Real-time timings are shrunk through env. Everything
// is killed in close(), and again at process exit if a test forgets.
//
//   const cluster = await startCluster({ instances: 3, env: { CHAT_THROTTLE_LIMIT: '50' } });
//   const res = await fetch(`${cluster.url(0)}/health`);        // base URL of instance 0
//   cluster.instanceId(1);                                       // 'node-1'
//   await cluster.redis.stop(); await cluster.redis.start();     // store outage and recovery
//   await cluster.waitForHealth(0, 'degraded');                  // polls GET /health until that status
//   const { code } = await cluster.kill(2, 'SIGKILL');           // resolves with the exit code/signal
//   await cluster.start(2);                                      // same port, id and env again
//   await cluster.waitForLog(0, /shutdown phase/);               // logs(i) holds every stdout/stderr line
//   await cluster.close();                                       // always, in afterAll
//
// Users for instance tests: createVerifiedUserOn(cluster, i) signs up and verifies through the real HTTP
// endpoints of instance i (mail read from cluster.smtp) and returns the cookie.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from './db.js';
import { CLIENT_LIMITS_OFF, TEST_AUTH_SECRET, TEST_REDIS_URL } from './env.js';
import { PGBOUNCER_MODE, startPgBouncer, type TestPgBouncer } from './pgbouncer.js';
import { startRedisCluster, type TestRedisCluster } from './redis-cluster.js';
import { freePort, startRedisServer, type TestRedis, trackChild } from './redis-server.js';
import { startSmtp, type TestSmtp, tokenFrom } from './smtp.js';

export const CLUSTER_ORIGIN = 'http://localhost:3000';

/** Shrunk real-time timings so liveness, dead-instance cleanup and debounce happen within seconds. */
export const FAST_TIMINGS: Record<string, string> = {
  HEARTBEAT_INTERVAL_MS: '250',
  REGISTRY_TTL_MS: '2500',
  DEAD_INSTANCE_MS: '3000',
  PRESENCE_DEBOUNCE_MS: '50',
  DEDUP_WINDOW_MS: '5000',
  SHUTDOWN_TIMEOUT_MS: '8000',
  SSE_KEEPALIVE_MS: '1000',
};

export interface ClusterOptions {
  /** Number of processes (default 2). */
  instances?: number;
  /** Extra env for every instance (wins over the defaults). */
  env?: Record<string, string>;
  /** Extra env for one instance (wins over `env`). */
  envFor?: (index: number) => Record<string, string>;
  /**
   * 'private' (default): own redis-server; 'shared': the shared test Redis with a unique key prefix; 'cluster': a
   * private Redis Cluster (3 masters + 3 replicas, CACHE_CLUSTER=true). HERALD_TEST_CACHE=cluster turns the
   * default into 'cluster', so the multi-instance suites run unchanged on a cluster.
   */
  redis?: 'private' | 'shared' | 'cluster';
  /** Health status to wait for at start (default 'ok'). */
  waitFor?: 'ok' | 'degraded';
  /**
   * Put a private PgBouncer (transaction mode) between the instances and the database: DATABASE_URL through it,
   * DATABASE_DIRECT_URL to the server. Default: HERALD_TEST_PGBOUNCER=1.
   */
  pgbouncer?: boolean;
  /** A database made elsewhere (e.g. on a private primary with a replica) instead of a fresh one on the test server. */
  database?: TestDatabase;
}

export interface HealthBody {
  status: string;
  instanceId?: string;
  checks?: Record<string, string>;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface TestCluster {
  size: number;
  db: TestDatabase;
  smtp: TestSmtp;
  /** The private redis-server or cluster (null with redis: 'shared'); stop/start act on every cluster node. */
  redis: TestRedis;
  /** The private Redis Cluster when running on one (null otherwise): kill a master, wait for failover. */
  redisCluster: TestRedisCluster | null;
  redisUrl: string;
  prefix: string;
  /** The PgBouncer in front of the database (null unless the pgbouncer option or HERALD_TEST_PGBOUNCER). */
  pgbouncer: TestPgBouncer | null;
  url(index: number): string;
  port(index: number): number;
  instanceId(index: number): string;
  /** Every stdout/stderr line of the instance so far (all of its runs). */
  logs(index: number): string[];
  /** Parsed JSON log lines (pino) of the instance. */
  jsonLogs(index: number): Array<Record<string, unknown>>;
  /** Resolves with the first line matching `pattern`, looking only at lines from index `fromLine` on. */
  waitForLog(index: number, pattern: RegExp | string, timeoutMs?: number, fromLine?: number): Promise<string>;
  waitForHealth(index: number, status?: string, timeoutMs?: number): Promise<HealthBody>;
  isRunning(index: number): boolean;
  /** Sends a signal and resolves when the process has exited. */
  kill(index: number, signal?: NodeJS.Signals): Promise<ExitInfo>;
  /** Resolves when the process exits on its own (or was killed). */
  exited(index: number): Promise<ExitInfo>;
  /** Starts instance `index` again (same port and id; `env` is merged into its env for this and later runs). */
  start(index: number, waitFor?: string, env?: Record<string, string>): Promise<void>;
  restart(index: number, signal?: NodeJS.Signals): Promise<void>;
  close(): Promise<void>;
}

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));

interface Instance {
  port: number;
  id: string;
  env: Record<string, string>;
  child?: ChildProcess;
  exit?: Promise<ExitInfo>;
  lines: string[];
  listeners: Set<(line: string) => void>;
}

// HERALD_TEST_START_TIMEOUT_MS lengthens it on a machine shared with other heavy jobs (the default stays 50 s).
const START_TIMEOUT_MS = Number(process.env.HERALD_TEST_START_TIMEOUT_MS) || 50_000;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function startCluster(options: ClusterOptions = {}): Promise<TestCluster> {
  const size = options.instances ?? 2;
  const [db, smtp] = await Promise.all([options.database ?? createTestDatabase(), startSmtp()]);
  const mode = options.redis ?? (process.env.HERALD_TEST_CACHE === 'cluster' ? 'cluster' : 'private');
  const redisCluster = mode === 'cluster' ? await startRedisCluster() : null;
  const redis = mode === 'shared' ? undefined : (redisCluster ?? (await startRedisServer()));
  const redisUrl = redis?.url ?? TEST_REDIS_URL;
  const pgbouncer = (options.pgbouncer ?? PGBOUNCER_MODE) ? await startPgBouncer() : null;
  const prefix = `c:${randomBytes(5).toString('hex')}:`;
  const runId = randomBytes(3).toString('hex');
  const instances: Instance[] = [];
  for (let i = 0; i < size; i++) {
    const port = await freePort();
    const id = options.redis === 'shared' ? `node-${i}-${runId}` : `node-${i}`;
    instances.push({
      port,
      id,
      lines: [],
      listeners: new Set(),
      env: {
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        HOST: '127.0.0.1',
        PORT: String(port),
        INSTANCE_ID: id,
        DATABASE_URL: pgbouncer ? pgbouncer.urlFor(db.url) : db.url,
        ...(pgbouncer ? { DATABASE_DIRECT_URL: db.url } : {}),
        CACHE_URL: redisUrl,
        CACHE_CLUSTER: redisCluster ? 'true' : 'false',
        CACHE_KEY_PREFIX: prefix,
        AUTH_SECRET: TEST_AUTH_SECRET,
        API_BASE_URL: `http://127.0.0.1:${port}`,
        FE_BASE_URL: CLUSTER_ORIGIN,
        CORS_ALLOWLISTED_ORIGINS: CLUSTER_ORIGIN,
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(smtp.port),
        AUTH_RATE_LIMIT_MAX: '10000',
        // The suite runs on a shared, loaded machine: only the overload tests turn the guard on.
        OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
        ...CLIENT_LIMITS_OFF,
        ...FAST_TIMINGS,
        ...options.env,
        ...options.envFor?.(i),
      },
    });
  }

  const inst = (index: number): Instance => {
    const found = instances[index];
    if (!found) throw new Error(`no instance ${index}`);
    return found;
  };

  const isRunning = (index: number) => {
    const child = inst(index).child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  };

  const spawnInstance = (index: number) => {
    const it = inst(index);
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: SERVER_DIR,
      env: { ...process.env, ...it.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(child);
    it.child = child;
    it.exit = new Promise((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    for (const stream of [child.stdout, child.stderr]) {
      let buffer = '';
      stream?.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        let nl = buffer.indexOf('\n');
        while (nl >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          it.lines.push(line);
          for (const listener of it.listeners) listener(line);
          nl = buffer.indexOf('\n');
        }
      });
    }
  };

  const waitForHealth = async (index: number, status = 'ok', timeoutMs = 30_000): Promise<HealthBody> => {
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      if (!isRunning(index)) {
        throw new Error(
          `instance ${index} exited while waiting for health:\n${inst(index).lines.join('\n')}`,
        );
      }
      try {
        const res = await fetch(`http://127.0.0.1:${inst(index).port}/health`);
        const body = (await res.json()) as HealthBody;
        if (body.status === status) return body;
        last = JSON.stringify(body);
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      await delay(100);
    }
    throw new Error(`instance ${index} never reported health "${status}" (last: ${last})`);
  };

  const kill = async (index: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<ExitInfo> => {
    const it = inst(index);
    if (!it.child || !it.exit) throw new Error(`instance ${index} was never started`);
    if (isRunning(index)) it.child.kill(signal);
    return it.exit;
  };

  const cluster: TestCluster = {
    size,
    db,
    smtp,
    redis: redis as TestRedis,
    redisCluster,
    redisUrl,
    prefix,
    pgbouncer,
    url: (index) => `http://127.0.0.1:${inst(index).port}`,
    port: (index) => inst(index).port,
    instanceId: (index) => inst(index).id,
    logs: (index) => inst(index).lines,
    jsonLogs: (index) =>
      inst(index).lines.flatMap((line) => {
        try {
          const parsed: unknown = JSON.parse(line);
          return parsed && typeof parsed === 'object' ? [parsed as Record<string, unknown>] : [];
        } catch {
          return [];
        }
      }),
    waitForLog(index, pattern, timeoutMs = 15_000, fromLine = 0) {
      const it = inst(index);
      const matches = (line: string) =>
        typeof pattern === 'string' ? line.includes(pattern) : pattern.test(line);
      const found = it.lines.slice(fromLine).find(matches);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          it.listeners.delete(listener);
          reject(new Error(`instance ${index}: no log line matching ${String(pattern)}`));
        }, timeoutMs);
        const listener = (line: string) => {
          if (!matches(line)) return;
          clearTimeout(timer);
          it.listeners.delete(listener);
          resolve(line);
        };
        it.listeners.add(listener);
      });
    },
    waitForHealth,
    isRunning,
    kill,
    exited(index) {
      const exit = inst(index).exit;
      if (!exit) throw new Error(`instance ${index} was never started`);
      return exit;
    },
    async start(index, waitFor = 'ok', env) {
      if (isRunning(index)) return;
      if (env) Object.assign(inst(index).env, env);
      spawnInstance(index);
      // A restart is a cold start too (tsx transform): same budget as the first start on a loaded machine.
      await waitForHealth(index, waitFor, START_TIMEOUT_MS);
    },
    async restart(index, signal = 'SIGTERM') {
      if (isRunning(index)) await kill(index, signal);
      spawnInstance(index);
      // The same cold-start budget as start() (tsx transform on a loaded machine).
      await waitForHealth(index, 'ok', START_TIMEOUT_MS);
    },
    async close() {
      await Promise.allSettled(
        instances.map(async (_, i) => {
          if (!isRunning(i)) return;
          const exit = kill(i, 'SIGTERM');
          const timer = setTimeout(() => inst(i).child?.kill('SIGKILL'), 5_000);
          await exit;
          clearTimeout(timer);
        }),
      );
      await redis?.close();
      await smtp.close();
      await pgbouncer?.close();
      await db.drop();
    },
  };

  try {
    // Start the first one alone so it runs the migrations; the others then find them done.
    // A cold start (tsx transform, migrations) on a loaded 2-core machine can take longer than a restart in a
    // test: give it the hook's budget rather than the 30 s default.
    spawnInstance(0);
    await waitForHealth(0, options.waitFor ?? 'ok', START_TIMEOUT_MS);
    for (let i = 1; i < size; i++) spawnInstance(i);
    await Promise.all(
      instances.slice(1).map((_, i) => waitForHealth(i + 1, options.waitFor ?? 'ok', START_TIMEOUT_MS)),
    );
  } catch (err) {
    await cluster.close();
    throw err;
  }
  return cluster;
}

/** Signs a user up on instance `index`, verifies the email through the real endpoint and signs in. */
export async function createVerifiedUserOn(
  cluster: TestCluster,
  index: number,
  opts: { email?: string; password?: string; name?: string; baseUrl?: string } = {},
): Promise<{ id: string; email: string; password: string; cookie: string }> {
  // baseUrl: another way in to the same instances (a load balancer in front of them).
  const base = opts.baseUrl ?? cluster.url(index);
  const email = (opts.email ?? `u-${randomBytes(5).toString('hex')}@example.test`).toLowerCase();
  const password = opts.password ?? 'correct horse battery';
  const headers = { 'content-type': 'application/json', origin: CLUSTER_ORIGIN };
  const signUp = await fetch(`${base}/auth/sign-up/email`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ email, password, name: opts.name ?? email.split('@')[0] }),
  });
  if (signUp.status !== 200) throw new Error(`sign-up failed: ${signUp.status} ${await signUp.text()}`);
  const id = ((await signUp.json()) as { user: { id: string } }).user.id;
  const mail = await cluster.smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('Verify'));
  const verify = await fetch(
    `${base}/auth/verify-email?token=${encodeURIComponent(tokenFrom(mail, 'verify-email'))}`,
    { redirect: 'manual' },
  );
  if (verify.status >= 400) throw new Error(`verify failed: ${verify.status}`);
  const signIn = await fetch(`${base}/auth/sign-in/email`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ email, password }),
  });
  if (signIn.status !== 200) throw new Error(`sign-in failed: ${signIn.status} ${await signIn.text()}`);
  const cookie = signIn.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] ?? '')
    .filter((c) => c && !c.endsWith('='))
    .join('; ');
  return { id, email, password, cookie };
}
