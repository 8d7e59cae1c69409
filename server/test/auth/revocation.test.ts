// A revoking request during a store outage (docs/architecture.md "Revocation convergence"): it takes effect on
// every instance — while the store is down (PostgreSQL fallback) and after it is back (no stale store record
// resurrects the session) — or it answers 503; it never reports a success it did not achieve.
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { AUTH_STORE_PREFIX } from '../../src/auth/revocation.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { startRedisServer, type TestRedis } from '../helpers/redis-server.js';
import { createVerifiedUser, jsonHeaders } from '../helpers/users.js';

describe('revocation while the store is unreachable', () => {
  let env: TestEnv;
  let redis: TestRedis;
  let a: App;
  let b: App;
  beforeAll(async () => {
    redis = await startRedisServer();
    env = await createTestEnv({ CACHE_URL: redis.url, CACHE_COMMAND_TIMEOUT_MS: '200' });
    [a, b] = [await env.app(), await env.app()];
  });
  afterAll(async () => {
    await env.close();
    await redis.close();
  });

  const signOut = (app: App, cookie: string) =>
    app.inject({ method: 'POST', url: '/auth/sign-out', headers: jsonHeaders(cookie), payload: {} });
  const whoami = async (app: App, cookie: string) =>
    (await app.ctx.sessions.fromHeaders({ cookie }))?.user.id;

  it('sign-out while the store is down is effective during the outage and after recovery', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    await redis.stop();
    const res = await signOut(a, u.cookie);
    expect(res.statusCode).toBe(200);
    // Both instances, store down: PostgreSQL answers, and the session is gone there.
    expect(await whoami(a, u.cookie)).toBeUndefined();
    expect(await whoami(b, u.cookie)).toBeUndefined();
    await redis.start();
    expect(await whoami(b, u.cookie)).toBeUndefined();
    // Once both instances have applied every pending repair they trust the store again; still signed out.
    await expect.poll(() => a.ctx.revocation.drain(), { timeout: 15_000 }).toBe(true);
    await expect.poll(() => b.ctx.revocation.drain(), { timeout: 15_000 }).toBe(true);
    expect(await whoami(a, u.cookie)).toBeUndefined();
    expect(await whoami(b, u.cookie)).toBeUndefined();
  });

  it('a stale store record left by a stalled store never resurrects a signed-out session', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    const token = await a.ctx.sessions.tokenFromHeaders({ cookie: u.cookie });
    const control = new Redis(redis.url);
    const key = `${env.prefix}${AUTH_STORE_PREFIX}${token}`;
    expect(await control.exists(key)).toBe(1);
    // Writes stall (the record survives, unlike a restart); reads keep working, so the stale record is visible.
    await control.call('CLIENT', 'PAUSE', '3000', 'WRITE');
    const pauseEnds = new Promise((resolve) => setTimeout(resolve, 3_000));
    const res = await signOut(a, u.cookie);
    expect(res.statusCode).toBe(200);
    // The store still holds the session record the sign-out could not delete …
    expect(await control.exists(key)).toBe(1);
    // … yet neither instance accepts it, during the stall and after it. The revoking instance knows at once;
    // the other one within its repair poll (~1 s, documented in docs/architecture.md), which on a loaded
    // machine may land just after the sign-out returns.
    expect(await whoami(a, u.cookie)).toBeUndefined();
    await expect.poll(() => whoami(b, u.cookie), { timeout: 2_500, interval: 100 }).toBeUndefined();
    await pauseEnds;
    expect(await whoami(b, u.cookie)).toBeUndefined();
    // The repair recorded in PostgreSQL deletes the stale record once the store accepts writes again.
    await expect.poll(() => control.exists(key), { timeout: 10_000 }).toBe(0);
    expect(await whoami(a, u.cookie)).toBeUndefined();
    expect(await whoami(b, u.cookie)).toBeUndefined();
    control.disconnect();
  });

  it('answers 503 when the revocation can be neither applied nor recorded, and the session stays valid', async () => {
    const u = await createVerifiedUser(a, env.smtp);
    // A real failure of the repair record: its table is out of reach (renamed) while the store is down.
    const admin = new pg.Client({ connectionString: env.db.url });
    await admin.connect();
    await redis.stop();
    await admin.query('alter table auth_store_repair rename to auth_store_repair_away');
    try {
      const res = await signOut(a, u.cookie);
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ code: 'UNAVAILABLE' });
      // Not signed out, and not claiming so: the session still works.
      expect(await whoami(b, u.cookie)).toBe(u.id);
    } finally {
      await admin.query('alter table auth_store_repair_away rename to auth_store_repair');
      await admin.end();
      await redis.start();
    }
  });
});
