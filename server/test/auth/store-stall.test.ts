// A stalled store (CLIENT PAUSE: connections stay open, commands just wait) must not stall requests: every store
// command is bounded (CACHE_COMMAND_TIMEOUT_MS), a timeout counts as an outage (the bus degrades), and sessions
// and rate limits carry on without the store. Timing is asserted by ordering against the pause's end, never by
// a wall-clock threshold.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { startRedisServer, type TestRedis } from '../helpers/redis-server.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';

const PAUSE_MS = 8_000;

describe('a stalled store', () => {
  let env: TestEnv;
  let redis: TestRedis;
  let app: App;
  let user: TestUser;
  beforeAll(async () => {
    redis = await startRedisServer();
    env = await createTestEnv({ CACHE_URL: redis.url, CACHE_COMMAND_TIMEOUT_MS: '300' });
    app = await env.app();
    user = await createVerifiedUser(app, env.smtp);
  });
  afterAll(async () => {
    await env.close();
    await redis.close();
  });

  it('authenticated requests and sign-in complete long before the stall ends; the bus degrades', async () => {
    const control = new Redis(redis.url);
    await control.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL');
    let pauseOver = false;
    const pauseEnds = new Promise<'pause over'>((resolve) =>
      setTimeout(() => {
        pauseOver = true;
        resolve('pause over');
      }, PAUSE_MS),
    );
    const work = (async () => {
      const authed = await app.inject({
        method: 'GET',
        url: '/notification/unread-count',
        headers: { cookie: user.cookie },
      });
      expect(authed.statusCode).toBe(200);
      const signIn = await app.inject({
        method: 'POST',
        url: '/auth/sign-in/email',
        headers: jsonHeaders(),
        payload: { email: user.email, password: user.password },
      });
      expect(signIn.statusCode).toBe(200);
      const again = await app.inject({
        method: 'GET',
        url: '/notification/unread-count',
        headers: { cookie: user.cookie },
      });
      expect(again.statusCode).toBe(200);
      return 'requests done' as const;
    })();
    expect(await Promise.race([work, pauseEnds])).toBe('requests done');
    // The timeout counted as an outage: the bus went degraded (local-only) rather than waiting on the store.
    expect(app.ctx.realtime.bus.isDegraded() || app.ctx.realtime.bus.stats().degradedTransitions > 0).toBe(
      true,
    );
    expect(pauseOver).toBe(false);
    await pauseEnds;
    // And it recovers on its own once the store answers.
    await expect.poll(() => app.ctx.realtime.bus.isDegraded(), { timeout: 20_000 }).toBe(false);
    control.disconnect();
  }, 30_000);
});
