// HTTP hot paths under load (autocannon, 100 connections): the paths DESIGN.md §7 measured on the reference.
// Spawns one real server process on PostgreSQL + Redis, signs a user up through the real endpoints (reading the
// verification mail from an in-process SMTP server), seeds 1,000 notifications, then loads each path in turn.
// Usage: npm run bench -- http [--duration 10] [--connections 100]
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { createTestDatabase } from '../server/test/helpers/db.js';
import { TEST_REDIS_URL } from '../server/test/helpers/env.js';
import { startSmtp, tokenFrom } from '../server/test/helpers/smtp.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const duration = arg('duration', 10);
const connections = arg('connections', 100);
const serverDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'server');
const ORIGIN = 'http://localhost:3000';

async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const address = srv.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  srv.close();
  return port;
}

async function waitForHealth(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const res = await fetch(`${url}/health`);
      if (res.ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not become healthy');
}

function cookieOf(res: Response): string {
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] ?? '')
    .filter((c) => !c.endsWith('='))
    .join('; ');
}

async function run(
  title: string,
  opts: { url: string; method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string },
) {
  const result = await autocannon({ ...opts, connections, duration });
  return {
    path: title,
    'req/s': Math.round(result.requests.average),
    'p50 ms': result.latency.p50,
    'p99 ms': result.latency.p99,
    'max ms': result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function main() {
  const [db, smtp, port] = await Promise.all([createTestDatabase(), startSmtp(), freePort()]);
  const base = `http://127.0.0.1:${port}`;
  let server: ChildProcess | undefined;
  try {
    server = spawn('npx', ['tsx', 'src/server.ts'], {
      cwd: serverDir,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        NODE_ENV: 'production',
        LOG_LEVEL: 'warn',
        PORT: String(port),
        HOST: '127.0.0.1',
        DATABASE_URL: db.url,
        CACHE_URL: TEST_REDIS_URL,
        CACHE_KEY_PREFIX: `bench:${port}:`,
        AUTH_SECRET: 'bench-secret-bench-secret-bench-secret-0123',
        API_BASE_URL: base,
        FE_BASE_URL: ORIGIN,
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(smtp.port),
        AUTH_RATE_LIMIT_MAX: '1000000',
      },
    });
    await waitForHealth(base);

    const email = `bench-${port}@example.test`;
    const password = 'bench password 123';
    const headers = { 'content-type': 'application/json', origin: ORIGIN };
    await fetch(`${base}/auth/sign-up/email`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ email, password, name: 'Bench' }),
    });
    const mail = await smtp.waitFor((m) => m.to.includes(email));
    await fetch(`${base}/auth/verify-email?token=${encodeURIComponent(tokenFrom(mail, 'verify-email'))}`);
    const signIn = await fetch(`${base}/auth/sign-in/email`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ email, password }),
    });
    const cookie = cookieOf(signIn);
    const session = (await (await fetch(`${base}/auth/get-session`, { headers: { cookie } })).json()) as {
      user: { id: string };
    };

    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    await client.query(
      `insert into notification (user_id, type, title, content, read, created_at)
       select $1, (array['system','message','mention','info'])[1 + g % 4], 'Title ' || g, 'Content number ' || g,
              g % 3 = 0, now() - (g || ' seconds')::interval
       from generate_series(1, 1000) g`,
      [session.user.id],
    );
    await client.end();

    const rows = [];
    rows.push(await run('GET /health', { url: `${base}/health` }));
    rows.push(await run('GET /auth/get-session', { url: `${base}/auth/get-session`, headers: { cookie } }));
    rows.push(
      await run('GET /notification/unread-count', {
        url: `${base}/notification/unread-count`,
        headers: { cookie },
      }),
    );
    rows.push(
      await run('GET /notification/list (1,000 rows)', {
        url: `${base}/notification/list?page=3&limit=20`,
        headers: { cookie },
      }),
    );
    rows.push(
      await run('POST /auth/sign-in/email', {
        url: `${base}/auth/sign-in/email`,
        method: 'POST',
        headers,
        body: JSON.stringify({ email, password }),
      }),
    );
    console.log(`\n${connections} connections, ${duration} s per path, one server process (2-core machine)`);
    console.table(rows);
  } finally {
    server?.kill('SIGTERM');
    if (server) await once(server, 'exit');
    await smtp.close();
    await db.drop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
