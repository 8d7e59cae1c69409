// `npm start` as a container runs it: a SIGTERM sent to the npm process must reach the server (the scripts `exec`
// so no shell sits in between to swallow it) and run the graceful shutdown, ending with exit code 0.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { TEST_AUTH_SECRET, TEST_REDIS_URL } from '../helpers/env.js';
import { freePort } from '../helpers/redis-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

describe('npm start', { timeout: 120_000 }, () => {
  let db: TestDatabase;
  afterAll(() => db?.drop());

  it('passes SIGTERM to the server: shutdown sequence logged, exit code 0', async () => {
    db = await createTestDatabase();
    const port = await freePort();
    // The node running this test goes first on PATH, so `npm start` runs the server on the same runtime.
    const child = spawn('npm', ['start'], {
      cwd: ROOT,
      env: {
        PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}`,
        HOME: process.env.HOME ?? '',
        NODE_ENV: 'development',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: db.url,
        CACHE_URL: TEST_REDIS_URL,
        CACHE_KEY_PREFIX: `t:start:${port}:`,
        AUTH_SECRET: TEST_AUTH_SECRET,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c.toString();
    });
    let gone = false;
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => {
        gone = true;
        resolve(code);
      }),
    );
    const deadline = Date.now() + 90_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      if (gone || Date.now() > deadline) throw new Error(`server did not become healthy:\n${out}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(out).toMatch(
      /Herald ready: open http:\/\/\S+ in a browser; database postgres 127\.0\.0\.1:5432\//,
    );
    // To npm itself, as `docker stop` does to PID 1.
    child.kill('SIGTERM');
    const code = await exited;
    expect(code, out).toBe(0);
    const order = ['"shutting down"', 'shutdown phase close-pools', '"exiting"'].map((m) => out.indexOf(m));
    expect(
      order.every((i) => i >= 0),
      out,
    ).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    // Nothing left listening.
    expect(
      await fetch(`http://127.0.0.1:${port}/health`).then(
        () => 'up',
        () => 'down',
      ),
    ).toBe('down');
  });
});
