// GET /health shapes (docs/api.md#operations): 200 ok, 503 { status: "error", … } without the database, 503
// { status: "shutting_down" } during shutdown; no auth; check results reused for HEALTH_CACHE_MS. Also: the
// test-only /__test routes exist only under NODE_ENV=test.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createDatabase, type Database } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { jsonHeaders } from '../helpers/users.js';

describe('GET /health', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv();
  });
  afterAll(() => env.close());

  it('answers 503 { status: "error" } while the database is down, 200 again once it is back', async () => {
    const real = await createDatabase({ databaseUrl: env.db.url, dataDir: './data' });
    let down = false;
    const database: Database = {
      ...real,
      ping: () => (down ? Promise.reject(new Error('connect ECONNREFUSED 10.0.0.1:5432')) : real.ping()),
    };
    // Every request checks again (no reuse of the last result).
    const app = await env.app({ HEALTH_CACHE_MS: '0' }, { overrides: { database } });
    // On a loaded machine the bus may still be subscribing after start-up's 2 s budget (health then says
    // `degraded`, rightly); this test is about the database check, so it starts once the bus is up.
    await vi.waitFor(() => expect(app.ctx.realtime.bus.isDegraded()).toBe(false), { timeout: 15_000 });
    const ok = await app.inject({ method: 'GET', url: '/health' });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({
      status: 'ok',
      instanceId: app.ctx.config.INSTANCE_ID,
      checks: { database: 'ok', cache: 'ok' },
    });
    down = true;
    const bad = await app.inject({ method: 'GET', url: '/health' });
    expect(bad.statusCode).toBe(503);
    expect(bad.json()).toEqual({
      status: 'error',
      instanceId: app.ctx.config.INSTANCE_ID,
      checks: { database: 'error', cache: 'ok' },
    });
    expect(bad.body).not.toContain('ECONNREFUSED');
    down = false;
    expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
  });

  it('reuses the check result within HEALTH_CACHE_MS, but reports a shutdown at once', async () => {
    const real = await createDatabase({ databaseUrl: env.db.url, dataDir: './data' });
    let pings = 0;
    const database: Database = {
      ...real,
      ping: () => {
        pings++;
        return real.ping();
      },
    };
    const app = await env.app({ HEALTH_CACHE_MS: '60000' }, { overrides: { database } });
    const results = await Promise.all(
      Array.from({ length: 5 }, () => app.inject({ method: 'GET', url: '/health' })),
    );
    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200]);
    expect((await app.inject({ method: 'GET', url: '/health' })).json().status).toBe('ok');
    expect(pings).toBe(1);
    app.ctx.lifecycle.beginShutdown();
    const res = await app.inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ status: 'shutting_down' });
  });

  it('answers 503 { status: "shutting_down" } once shutdown began', async () => {
    const app = await env.app();
    app.ctx.lifecycle.beginShutdown();
    const res = await app.inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ status: 'shutting_down' });
  });
});

describe('test-only routes', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv();
  });
  afterAll(() => env.close());

  it.each(['development', 'production'])('do not exist with NODE_ENV=%s', async (nodeEnv) => {
    const app = await env.app({ NODE_ENV: nodeEnv });
    for (const [method, url, payload] of [
      ['POST', '/__test/realtime/publish', { payload: 1 }],
      ['GET', '/__test/realtime/received', undefined],
      ['POST', '/__test/realtime/online', { handle: 'h', userId: 'u' }],
      ['POST', '/__test/realtime/offline', { handle: 'h' }],
      ['POST', '/__test/realtime/chat-join', { connectionId: 'c', role: 'admin', userId: 'u' }],
      ['GET', '/__test/realtime/presence', undefined],
    ] as const) {
      const res = await app.inject({ method, url, headers: jsonHeaders(), payload });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toMatchObject({ code: 'NOT_FOUND' });
    }
    expect(Object.keys((await app.inject({ method: 'GET', url: '/openapi.json' })).json().paths)).not.toEqual(
      expect.arrayContaining([expect.stringMatching(/__test/)]),
    );
  });

  it('exist with NODE_ENV=test (the multi-process tests drive them)', async () => {
    const app = await env.app();
    const res = await app.inject({ method: 'GET', url: '/__test/realtime/received' });
    expect(res.statusCode).toBe(200);
  });
});
