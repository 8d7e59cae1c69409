// Start-up that waits: the database and the store are retried for STARTUP_WAIT_MS with one log line per attempt
// (host:port only), then one line naming the variable and the cause on stderr and exit 1; a database that appears
// meanwhile is used. Real server processes, a closed port, a database that does not exist, and a TCP proxy to
// PostgreSQL opened only after the server's first failed attempt.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { TEST_AUTH_SECRET, TEST_REDIS_URL } from '../helpers/env.js';
import { spawnServer } from '../helpers/process.js';
import { freePort } from '../helpers/redis-server.js';

const PASSWORD = 's3cret-pw-do-not-log';

function baseEnv(port: number): Record<string, string> {
  return {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'info',
    AUTH_SECRET: TEST_AUTH_SECRET,
    CACHE_URL: TEST_REDIS_URL,
    CACHE_KEY_PREFIX: `t:startup-wait:${port}:`,
    SHUTDOWN_TIMEOUT_MS: '5000',
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
  };
}

/** A port nothing listens on (taken and released; nothing else binds it within the test). */
const closedPort = freePort;

describe('start-up wait', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('database port closed: one line per attempt, then one line naming DATABASE_URL and the cause, exit 1, no credentials', async () => {
    const dbPort = await closedPort();
    const server = spawnServer({
      ...baseEnv(await freePort()),
      DATABASE_URL: `postgres://herald:${PASSWORD}@127.0.0.1:${dbPort}/herald`,
      STARTUP_WAIT_MS: '1500',
    });
    const { code } = await server.exited;
    expect(code).toBe(1);
    const attempts = server.stdout.filter((l) => l.includes('waiting for DATABASE_URL'));
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    for (const line of attempts) expect(line).toContain(`127.0.0.1:${dbPort}/herald`);
    const errors = server.stderr.filter((l) => l.trim() !== '');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(
      /^Herald cannot start: DATABASE_URL \(127\.0\.0\.1:\d+\/herald\) not reachable after \d+ attempts/,
    );
    expect(errors[0]).toContain('ECONNREFUSED');
    expect(errors[0]).toContain('STARTUP_WAIT_MS');
    const all = [...server.stdout, ...server.stderr].join('\n');
    expect(all).not.toContain(PASSWORD);
    expect(all).not.toContain('herald:'.concat(PASSWORD));
  });

  it('a database that does not exist is said so at once (not waited for)', async () => {
    const url = new URL(db.url);
    url.pathname = `/${db.name}_missing`;
    const server = spawnServer({
      ...baseEnv(await freePort()),
      DATABASE_URL: url.toString(),
      STARTUP_WAIT_MS: '60000',
    });
    const { code } = await server.exited;
    expect(code).toBe(1);
    const errors = server.stderr.filter((l) => l.trim() !== '');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/DATABASE_URL \(.*_missing\): the database does not exist/);
    expect(server.stdout.filter((l) => l.includes('waiting for DATABASE_URL'))).toHaveLength(0);
  });

  it('store port closed: the line names CACHE_URL, never its password', async () => {
    const cachePort = await closedPort();
    const server = spawnServer({
      ...baseEnv(await freePort()),
      DATABASE_URL: db.url,
      CACHE_URL: `redis://:${PASSWORD}@127.0.0.1:${cachePort}`,
      STARTUP_WAIT_MS: '800',
    });
    const { code } = await server.exited;
    expect(code).toBe(1);
    const errors = server.stderr.filter((l) => l.trim() !== '');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(
      new RegExp(`^Herald cannot start: CACHE_URL \\(127\\.0\\.0\\.1:${cachePort}\\) not reachable`),
    );
    // The cause is the socket's (refused), not the client library's "Connection is closed.".
    expect(errors[0]).toContain(`ECONNREFUSED 127.0.0.1:${cachePort}`);
    expect([...server.stdout, ...server.stderr].join('\n')).not.toContain(PASSWORD);
  });

  // A bound against a hang, not a performance threshold: the whole start-up runs inside the test, which a loaded
  // machine can stretch past the default minute.
  it('a database that appears after the first failed attempt is used: the server starts and serves /health', {
    timeout: 180_000,
  }, async () => {
    const proxyPort = await freePort();
    const httpPort = await freePort();
    const target = new URL(db.url);
    const url = new URL(db.url);
    url.port = String(proxyPort);
    const server = spawnServer({
      ...baseEnv(httpPort),
      DATABASE_URL: url.toString(),
      STARTUP_WAIT_MS: '120000',
    });
    let proxy: net.Server | undefined;
    try {
      await server.waitForLine(/waiting for DATABASE_URL.*attempt 1 failed/);
      // PostgreSQL "comes up": a TCP proxy to the real one on the port the server keeps trying.
      proxy = net.createServer((socket) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname);
        socket.pipe(upstream).pipe(socket);
        socket.on('error', () => upstream.destroy());
        upstream.on('error', () => socket.destroy());
      });
      await new Promise<void>((resolve) => proxy?.listen(proxyPort, '127.0.0.1', resolve));
      await server.waitForLine(/Herald ready/);
      expect(server.stdout.some((l) => /DATABASE_URL .*reachable/.test(l))).toBe(true);
      const res = await fetch(`http://127.0.0.1:${httpPort}/health`);
      expect(res.status).toBe(200);
      server.child.kill('SIGTERM');
      expect((await server.exited).code).toBe(0);
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      // Open client connections through the proxy keep close() waiting; they belong to the stopped server.
      await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
    }
  });
});
