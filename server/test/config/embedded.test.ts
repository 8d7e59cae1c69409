// The embedded default: no DATABASE_URL and no CACHE_URL → PGlite under DATA_DIR and the in-process store. Built
// in-process (full account cycle) and started as a real process (`npm start` equivalent) that stops on SIGTERM.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { TEST_ORIGIN } from '../helpers/app.js';
import { freePort } from '../helpers/redis-server.js';
import { startSmtp } from '../helpers/smtp.js';
import { createVerifiedUser, jsonHeaders } from '../helpers/users.js';

const SERVER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// Both tests boot PGlite (WASM, CPU bound); running them side by side uses both cores.
// PGlite initialises a fresh cluster in WebAssembly (initdb + migrations): seconds on an idle machine, much more
// on a loaded CI runner, so these tests get a generous timeout (a hang bound, not a performance threshold).
describe.concurrent('embedded default', { timeout: 180_000 }, () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('in-process: PGlite + in-process store, /health, sign-up → verify → sign-in → session → sign-out', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-embedded-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const smtp = await startSmtp();
    cleanups.push(() => smtp.close());
    const app = await buildApp(
      loadConfig({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        DATA_DIR: dataDir,
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(smtp.port),
        // The user helpers send requests from TEST_ORIGIN, a separately deployed front end; unset, the front
        // end would be the bundled web app at the service's own URL.
        FE_BASE_URL: TEST_ORIGIN,
      }),
    );
    cleanups.push(() => app.close());
    expect(app.ctx.database.kind).toBe('pglite');
    expect(app.ctx.store.kind).toBe('memory');
    expect(app.ctx.config.distributed).toBe(false);
    const health = await app.inject({ method: 'GET', url: '/health' });
    expect(health.statusCode).toBe(200);
    expect(health.json()).toMatchObject({ status: 'ok', checks: { database: 'ok', cache: 'ok' } });

    const u = await createVerifiedUser(app, smtp);
    const s = await app.inject({ method: 'GET', url: '/auth/get-session', headers: { cookie: u.cookie } });
    expect(s.json().user.email).toBe(u.email);
    expect((await app.ctx.sessions.fromHeaders({ cookie: u.cookie }))?.user.id).toBe(u.id);
    const out = await app.inject({ method: 'POST', url: '/auth/sign-out', headers: jsonHeaders(u.cookie) });
    expect(out.statusCode).toBe(200);
    expect(await app.ctx.sessions.fromHeaders({ cookie: u.cookie })).toBeNull();
  });

  it('starts with no DATABASE_URL/CACHE_URL, serves /health, logs request ids, exits 0 on SIGTERM', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-start-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: SERVER_DIR,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        PORT: String(port),
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    // Wait for the "listening" log line rather than polling on a timer.
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (stdout.includes('Server listening')) resolve();
      };
      child.stdout?.on('data', check);
      child.on('exit', (code) => reject(new Error(`exited early (${code}): ${stderr}`)));
    });
    const res = await fetch(`http://127.0.0.1:${port}/health`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; checks: { database: string; cache: string } };
    expect(body.status).toBe('ok');
    expect(res.headers.get('x-request-id')).toBeTruthy();
    // /health (like /auth/get-session) is polled, so it is not access-logged (ACCESS_LOG_POLLED_ROUTES); an ordinary
    // route is, with its id.
    const ordinary = await fetch(`http://127.0.0.1:${port}/auth/ok`);
    expect(ordinary.status).toBe(200);
    const requestId = ordinary.headers.get('x-request-id');
    const polled = await fetch(`http://127.0.0.1:${port}/auth/get-session`);
    expect(await polled.json()).toBeNull();
    const polledId = polled.headers.get('x-request-id');
    expect(requestId).toBeTruthy();
    expect(stdout).toContain('CACHE_URL is not set');
    // The slow first start says what it is doing instead of staying silent.
    expect(stdout).toContain(`initialising embedded database at ${path.join(dataDir, 'pglite')}`);
    expect(stdout).toContain('running migrations');
    expect(stdout).toMatch(/migrations done in \d+ ms/);
    // It holds DATA_DIR's lock while it runs (a CLI next to it would refuse) and removes it on exit.
    expect(existsSync(path.join(dataDir, 'herald.lock'))).toBe(true);

    cleanups.push(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    expect(code).toBe(0);
    expect(existsSync(path.join(dataDir, 'herald.lock'))).toBe(false);
    const lines = stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { reqId?: string; msg?: string });
    expect(lines.some((l) => l.reqId === requestId && l.msg === 'request completed')).toBe(true);
    expect(lines.some((l) => l.reqId === polledId)).toBe(false);
  });
});
