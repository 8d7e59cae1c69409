// Production-like server processes for the comparison benchmarks (compare, overload): Herald started the way an
// operator starts it (NODE_ENV=production, default LOG_LEVEL, default timings, logs to a file rather than to a
// pipe this process would have to drain), on a fresh test database, a private redis-server and the in-process
// SMTP capture; and a bare Fastify process answering the same JSON bodies from memory (the in-run baseline).
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CLUSTER_ORIGIN,
  createTestDatabase,
  freePort,
  startRedisServer,
  startSmtp,
  TEST_AUTH_SECRET,
  type TestDatabase,
  type TestRedis,
  type TestSmtp,
  tokenFrom,
  trackChild,
} from '@herald/server/testkit';
import { ONE_ADDRESS_LIMITS } from './_lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const SERVER_DIR = path.join(here, '..', 'server');

export interface Stack {
  db: TestDatabase;
  redis: TestRedis;
  smtp: TestSmtp;
  /** Scratch directory for logs, bodies and profiles. */
  dir: string;
  close(): Promise<void>;
}

export async function startStack(): Promise<Stack> {
  const [db, redis, smtp] = await Promise.all([createTestDatabase(), startRedisServer(), startSmtp()]);
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-bench-'));
  return {
    db,
    redis,
    smtp,
    dir,
    async close() {
      await redis.close();
      await smtp.close();
      await db.drop();
    },
  };
}

export interface ServerProcess {
  url: string;
  port: number;
  pid: number;
  logFile: string;
  /** SIGTERM, then waits for the exit (a --cpu-prof profile is written on that exit). */
  stop(): Promise<void>;
}

async function waitForHttp(url: string, child: ChildProcess, logFile: string, timeoutMs = 180_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server exited during start-up; see ${logFile}`);
    }
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} never answered 200; see ${logFile}`);
}

function launch(
  args: string[],
  env: Record<string, string>,
  logFile: string,
  cwd = SERVER_DIR,
): ChildProcess {
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  trackChild(child);
  return child;
}

function stopper(child: ChildProcess) {
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  };
}

/**
 * Herald as `npm start` runs it (tsx loads the TypeScript once; the code that runs is the same JavaScript), with
 * NODE_ENV=production. Only the per-address caps are lifted (every benchmark connection comes from 127.0.0.1).
 */
export async function startHerald(
  stack: Stack,
  opts: {
    env?: Record<string, string>;
    nodeArgs?: string[];
    name?: string;
    /** Another tree's `server/` (a worktree of another commit): that code, on the same stack. */
    serverDir?: string;
  } = {},
): Promise<ServerProcess> {
  const port = await freePort();
  const logFile = path.join(stack.dir, `${opts.name ?? 'herald'}-${port}.log`);
  const child = launch(
    [...(opts.nodeArgs ?? []), '--import', 'tsx', 'src/server.ts'],
    {
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      INSTANCE_ID: `bench-${port}`,
      DATABASE_URL: stack.db.url,
      CACHE_URL: stack.redis.url,
      AUTH_SECRET: TEST_AUTH_SECRET,
      API_BASE_URL: `http://127.0.0.1:${port}`,
      FE_BASE_URL: CLUSTER_ORIGIN,
      CORS_ALLOWLISTED_ORIGINS: CLUSTER_ORIGIN,
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: String(stack.smtp.port),
      // Signing up and in the benchmark users from one address.
      AUTH_RATE_LIMIT_MAX: '100000',
      ...ONE_ADDRESS_LIMITS,
      ...opts.env,
    },
    logFile,
    opts.serverDir,
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/health`, child, logFile);
  return { url, port, pid: child.pid ?? 0, logFile, stop: stopper(child) };
}

/** The bare Fastify baseline (bench/_baseline.ts) serving `bodies` (path → JSON body) from memory. */
export async function startBaseline(stack: Stack, bodies: Record<string, unknown>): Promise<ServerProcess> {
  const port = await freePort();
  const bodiesFile = path.join(stack.dir, `baseline-bodies-${port}.json`);
  writeFileSync(bodiesFile, JSON.stringify(bodies));
  const logFile = path.join(stack.dir, `baseline-${port}.log`);
  const child = launch(
    ['--import', 'tsx', path.join(here, '_baseline.ts')],
    { PORT: String(port), BODIES_FILE: bodiesFile },
    logFile,
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/health`, child, logFile);
  return { url, port, pid: child.pid ?? 0, logFile, stop: stopper(child) };
}

export interface BenchUser {
  id: string;
  email: string;
  password: string;
  cookie: string;
}

/** Signs a user up, verifies the email through the real link and signs in (all through HTTP). */
export async function createUser(base: string, smtp: TestSmtp, tag = 'bench'): Promise<BenchUser> {
  const email = `${tag}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@example.test`;
  const password = 'correct horse battery';
  const headers = { 'content-type': 'application/json', origin: CLUSTER_ORIGIN };
  const signUp = await fetch(`${base}/auth/sign-up/email`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ email, password, name: tag }),
  });
  if (signUp.status !== 200) throw new Error(`sign-up failed: ${signUp.status} ${await signUp.text()}`);
  const id = ((await signUp.json()) as { user: { id: string } }).user.id;
  const mail = await smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('Verify'));
  const verify = await fetch(
    `${base}/auth/verify-email?token=${encodeURIComponent(tokenFrom(mail, 'verify-email'))}`,
    { redirect: 'manual' },
  );
  await verify.arrayBuffer();
  if (verify.status >= 400) throw new Error(`verify failed: ${verify.status}`);
  const signIn = await fetch(`${base}/auth/sign-in/email`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ email, password }),
  });
  if (signIn.status !== 200) throw new Error(`sign-in failed: ${signIn.status} ${await signIn.text()}`);
  await signIn.arrayBuffer();
  const cookie = signIn.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] ?? '')
    .filter((c) => c && !c.endsWith('='))
    .join('; ');
  return { id, email, password, cookie };
}

/** 1,000 notifications (a third read) for the user, and the cursor's unread count kept exact. */
export const SEED_NOTIFICATIONS_SQL = `
  with ins as (
    insert into notification (user_id, type, title, content, read, created_at, updated_at)
    select $1, (array['system','message','mention','info'])[1 + g % 4], 'Notification ' || g,
           'Body of notification ' || g || ' with some longer content that a user might read: ' || md5(g::text),
           g % 3 = 0, now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval
    from generate_series(1, $2::int) g
    returning read
  )
  insert into notification_cursor (user_id, unread)
  values ($1, (select count(*) from ins where not read))
  on conflict (user_id) do update set unread = notification_cursor.unread + excluded.unread`;

/** A temp directory for artefacts that outlive the stack (profiles). */
export function scratchDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}
