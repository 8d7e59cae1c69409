// Durable push queue across instances: the instance (a real server process) that claimed a message is killed
// (SIGKILL) while its request is in flight; once the lease expires another instance (an app built in this
// process on the same database and store, started only after the kill) sends it, and the browser gets it once.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../../src/app.js';
import { generateVapidKeys, loadConfig } from '../../src/config.js';
import {
  CLUSTER_ORIGIN,
  createVerifiedUserOn,
  FAST_TIMINGS,
  startCluster,
  type TestCluster,
} from '../helpers/cluster.js';
import { TEST_AUTH_SECRET } from '../helpers/env.js';
import { startPushService, type TestPushService } from '../helpers/push-service.js';

const vapid = generateVapidKeys();

describe('push queue across instances', () => {
  let cluster: TestCluster;
  let push: TestPushService;
  let other: App | undefined;
  const env = {
    ADMIN_EMAILS: 'boss@example.test',
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    VAPID_SUBJECT: 'mailto:ops@example.com',
    PUSH_ALLOW_PRIVATE_ENDPOINTS: 'true',
    PUSH_QUEUE_POLL_MS: '100',
    // Lease = 3 × timeout + 1 s = 4 s: long enough that the killed instance's request is still "in flight".
    PUSH_TIMEOUT_MS: '1000',
    // A loaded CI machine: store commands may take longer than the default 1.5 s.
    CACHE_COMMAND_TIMEOUT_MS: '10000',
  };

  beforeAll(async () => {
    push = await startPushService({ vapidPublicKey: vapid.publicKey });
    cluster = await startCluster({ instances: 1, env: { ...FAST_TIMINGS, ...env } });
  });
  afterAll(async () => {
    await other?.close();
    await cluster?.close();
    await push?.close();
  });

  it('an instance killed mid-send: another sends the message once its lease expires', async () => {
    const admin = await createVerifiedUserOn(cluster, 0, { email: 'boss@example.test' });
    const user = await createVerifiedUserOn(cluster, 0);
    const headers = (cookie: string) => ({
      'content-type': 'application/json',
      origin: CLUSTER_ORIGIN,
      cookie,
    });
    const prefs = await fetch(`${cluster.url(0)}/notification/preferences`, {
      method: 'PATCH',
      headers: headers(user.cookie),
      body: JSON.stringify({ pushEnabled: true }),
    });
    expect(prefs.status).toBe(200);
    const browser = push.browser();
    const sub = await fetch(`${cluster.url(0)}/notification/push/subscriptions`, {
      method: 'POST',
      headers: headers(user.cookie),
      body: JSON.stringify(browser.subscription),
    });
    expect(sub.status).toBe(201);
    // Its first request is held past the kill (and would be refused anyway): never accepted.
    push.program(browser.token, [{ status: 503, delayMs: 30_000 }]);
    const res = await fetch(`${cluster.url(0)}/admin/notifications/send`, {
      method: 'POST',
      headers: headers(admin.cookie),
      body: JSON.stringify({
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'message', title: 'survives a crash', content: 'x' },
      }),
    });
    expect(res.status).toBe(200);
    await push.until(() => push.received.some((m) => m.token === browser.token));
    await cluster.kill(0, 'SIGKILL');
    other = await buildApp(
      loadConfig({
        ...env,
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        DATABASE_URL: cluster.db.url,
        CACHE_URL: cluster.redisUrl,
        CACHE_KEY_PREFIX: cluster.prefix,
        AUTH_SECRET: TEST_AUTH_SECRET,
        OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      }),
    );
    await push.until(() => push.accepted.some((m) => m.token === browser.token), 40_000);
    expect(push.accepted.filter((m) => m.token === browser.token)).toHaveLength(1);
    expect(push.accepted[0]?.payload.title).toBe('survives a crash');
    expect(push.errors).toEqual([]);
    const client = new pg.Client({ connectionString: cluster.db.url });
    await client.connect();
    try {
      // Settled as sent once, after two attempts (the killed one and the one that went through).
      const deadline = Date.now() + 10_000;
      let rows: Array<{ status: string; attempts: number }> = [];
      while (Date.now() < deadline) {
        rows = (await client.query('select status, attempts from push_delivery')).rows;
        if (rows[0]?.status === 'sent') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(rows).toEqual([{ status: 'sent', attempts: 2 }]);
    } finally {
      await client.end();
    }
  }, 120_000);
});
