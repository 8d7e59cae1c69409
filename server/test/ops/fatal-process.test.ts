// An uncaught exception in a real server process: logged once at fatal (message, stack, origin), the shutdown
// sequence runs (its phases logged, pools closed), and the process exits 1. The exception is raised inside the
// server by a preloaded module (NODE_OPTIONS=--import) that throws from a timer when the test sends SIGUSR2, as a
// bug in a callback would: nothing catches it but the process-level handler.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { TEST_AUTH_SECRET, TEST_REDIS_URL } from '../helpers/env.js';
import { spawnServer } from '../helpers/process.js';
import { freePort } from '../helpers/redis-server.js';

describe('an uncaught exception in the server process', () => {
  let db: TestDatabase;
  let dir: string;
  let preload: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(path.join(tmpdir(), 'herald-fatal-'));
    preload = path.join(dir, 'throw-on-usr2.mjs');
    writeFileSync(
      preload,
      "process.on('SIGUSR2', () => setTimeout(() => { throw new Error('boom from a timer'); }, 0));\n",
    );
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await db.drop();
  });

  // A bound against a hang: the server starts inside the test.
  it('is logged at fatal with its stack and origin, the shutdown sequence runs, exit 1', {
    timeout: 180_000,
  }, async () => {
    const port = await freePort();
    const server = spawnServer({
      NODE_ENV: 'test',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      AUTH_SECRET: TEST_AUTH_SECRET,
      DATABASE_URL: db.url,
      CACHE_URL: TEST_REDIS_URL,
      CACHE_KEY_PREFIX: `t:fatal:${port}:`,
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      NODE_OPTIONS: `--import ${pathToFileURL(preload).href}`,
    });
    try {
      await server.waitForLine(/Herald ready/);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      server.child.kill('SIGUSR2');
      const { code } = await server.exited;
      expect(code).toBe(1);
      const lines = server.stdout
        .filter((l) => l.startsWith('{'))
        .map(
          (l) => JSON.parse(l) as { level: number; msg: string; err?: { stack?: string }; origin?: string },
        );
      const fatal = lines.filter((l) => l.level === 60);
      expect(fatal).toHaveLength(1);
      expect(fatal[0]?.msg).toContain('uncaught exception: boom from a timer');
      expect(fatal[0]?.err?.stack).toContain('throw-on-usr2.mjs');
      expect(fatal[0]?.origin).toBe('uncaughtException');
      // After it, the graceful sequence: its phases in order, to the pools.
      const after = lines.slice(lines.indexOf(fatal[0] as (typeof lines)[number]));
      const phases = after.filter((l) => l.msg.startsWith('shutdown phase')).map((l) => l.msg);
      expect(phases[0]).toBe('shutdown phase stop-accepting');
      expect(phases.at(-1)).toBe('shutdown phase close-pools');
      expect(after.some((l) => l.msg === 'shutdown complete')).toBe(true);
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
  });
});
