// `npm run dev` (scripts/dev.mjs) stops everything it started on SIGTERM and on SIGINT: the API (npm → sh → tsx
// watch → node) and Vite (npm → vite), so no port and no embedded-database lock is left held. The signal goes to the
// `npm run dev` process itself, as `kill -TERM <pid>` of an operator or a process manager sends it: npm forwards it
// to its script, which must therefore be the script's node process (`exec`), not a shell that would die alone.
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { TEST_AUTH_SECRET, TEST_REDIS_URL } from '../helpers/env.js';
import { freePort, trackChild } from '../helpers/redis-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** Every live descendant of `pid` (from /proc), so the test sees what the script started. */
function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid …; comm may contain spaces and parentheses, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parentOf.set(Number(entry), ppid);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of parentOf) {
      if (parent === p) {
        out.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie waiting for its parent counts as gone.
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    // Vite binds "localhost", which may be ::1 only: let Node try both families.
    const socket = net.connect({ port, host: 'localhost', autoSelectFamily: true });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function until(
  what: string,
  probe: () => Promise<boolean> | boolean,
  timeoutMs = 150_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('npm run dev stops all its children', { timeout: 300_000 }, () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`on ${signal}: API, tsx watch and Vite exit and their ports are free`, async () => {
      const [apiPort, webPort] = await Promise.all([freePort(), freePort()]);
      const dev: ChildProcess = spawn('npm', ['run', 'dev'], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/tmp',
          PORT: String(apiPort),
          WEB_DEV_PORT: String(webPort),
          HOST: '127.0.0.1',
          NODE_ENV: 'test',
          LOG_LEVEL: 'warn',
          DATABASE_URL: db.url,
          CACHE_URL: TEST_REDIS_URL,
          CACHE_KEY_PREFIX: `t:dev-signals:${apiPort}:`,
          AUTH_SECRET: TEST_AUTH_SECRET,
          OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
        },
        stdio: 'ignore',
      });
      trackChild(dev);
      const exited = new Promise<number | null>((resolve) => dev.once('exit', (code) => resolve(code)));
      const pid = dev.pid ?? 0;
      let started: number[] = [];
      try {
        await until(
          'the API and Vite to listen',
          async () => (await listening(apiPort)) && (await listening(webPort)),
        );
        started = descendants(pid);
        // scripts/dev.mjs; npm, sh, tsx watch and its node child for the API; npm and vite for the web app.
        expect(started.length).toBeGreaterThanOrEqual(5);
        dev.kill(signal);
        expect(await exited).toBe(0);
        await until('every descendant to exit', () => started.every((p) => !alive(p)), 20_000);
        expect(await listening(apiPort)).toBe(false);
        expect(await listening(webPort)).toBe(false);
      } finally {
        // Whatever is left (a failed assertion above) must not outlive the test: what was seen at the start too,
        // since a process whose parent died is no longer a descendant.
        for (const p of new Set([...started, ...descendants(pid)])) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {
            // already gone
          }
        }
        if (dev.exitCode === null) dev.kill('SIGKILL');
      }
    });
  }
});
