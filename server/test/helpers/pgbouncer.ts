// A private PgBouncer (Debian package `pgbouncer`) on a free loopback port, in transaction pooling mode, in front of
// a PostgreSQL server (the shared test server by default). Any database name is passed through (`* =`), so each
// test's own database is reachable through it under the same name.
//
//   const bouncer = await startPgBouncer();
//   const url = bouncer.urlFor(db.url);          // same database, through PgBouncer
//   await bouncer.close();
//
// HERALD_TEST_PGBOUNCER=1 makes createTestEnv (helpers/app.ts) and startCluster (helpers/cluster.ts) put one in
// front of every test database: DATABASE_URL goes through it, DATABASE_DIRECT_URL names the server.
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TEST_PG_URL } from './env.js';
import { freePort, trackChild } from './redis-server.js';

export const PGBOUNCER_BIN = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p));

/** HERALD_TEST_PGBOUNCER=1: the multi-instance suites run with DATABASE_URL through PgBouncer. */
export const PGBOUNCER_MODE = /^(1|true|yes)$/i.test(process.env.HERALD_TEST_PGBOUNCER ?? '');

export interface TestPgBouncer {
  port: number;
  /** `url` (a postgres:// URL of the target server) rewritten to go through this PgBouncer. */
  urlFor(url: string): string;
  /** PgBouncer's log so far. */
  log(): string;
  close(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Server to pool (default: the shared test PostgreSQL). */
  target?: { host: string; port: number };
  /** Server connections per database/user pair (PgBouncer's default_pool_size). */
  poolSize?: number;
}

function waitForPort(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      if (child.exitCode !== null) return reject(new Error(`pgbouncer exited with ${child.exitCode}`));
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        socket.destroy();
        if (Date.now() > deadline) reject(new Error(`pgbouncer did not listen on ${port}`));
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

export async function startPgBouncer(options: PgBouncerOptions = {}): Promise<TestPgBouncer> {
  if (!PGBOUNCER_BIN) throw new Error('pgbouncer is not installed (apt-get install -y pgbouncer)');
  const server = new URL(TEST_PG_URL);
  const target = options.target ?? { host: server.hostname, port: Number(server.port || 5432) };
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-pgbouncer-'));
  const logFile = path.join(dir, 'pgbouncer.log');
  writeFileSync(path.join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${target.host} port=${target.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      // What the contract requires to work: a stock PgBouncer in transaction mode (no ignore_startup_parameters).
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize ?? 20}`,
      'max_client_conn = 2000',
      'admin_users = postgres',
      `logfile = ${logFile}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root: it drops to the postgres user, which must read the files.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    chmodSync(dir, 0o777);
    writeFileSync(logFile, '');
    chmodSync(logFile, 0o666);
  }
  const child = spawn(
    PGBOUNCER_BIN,
    [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  trackChild(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const readLog = () => {
    try {
      return readFileSync(logFile, 'utf8') + stderr;
    } catch {
      return stderr;
    }
  };
  try {
    await waitForPort(port, child, 10_000);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${readLog()}`);
  }
  return {
    port,
    urlFor(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    log: readLog,
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
