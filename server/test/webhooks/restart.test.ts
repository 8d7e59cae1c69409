// Durability across instances: deliveries pending (some in flight, leased by the instance) when that server
// process is killed are sent by another process once their lease expires — each event's webhook-id answered
// with a 2xx exactly once, the id the same as on the attempt the dead instance made.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { bodyOf, startReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const EVENTS = 6;

describe('webhook deliveries survive an instance restart', () => {
  let cluster: TestCluster;
  let rx: WebhookReceiver;
  let db: pg.Client;

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: {
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_QUEUE_POLL_MS: '100',
        WEBHOOK_RETRY_BASE_MS: '100',
        WEBHOOK_TIMEOUT_MS: '1500',
        WEBHOOK_CONCURRENCY_PER_ENDPOINT: '3',
      },
    });
    // Only instance 0 runs until it is killed; instance 1 takes over afterwards.
    await cluster.kill(1, 'SIGTERM');
    db = new pg.Client({ connectionString: cluster.db.url });
    await db.connect();
    rx = await startReceiver();
  });
  afterAll(async () => {
    await db?.end();
    await rx?.close();
    await cluster?.close();
  });

  it('a killed instance’s pending and in-flight deliveries are delivered by another, once each', async () => {
    const base = cluster.url(0);
    const admin = await createVerifiedUserOn(cluster, 0);
    await db.query(`update "user" set role = 'admin' where id = $1`, [admin.id]);
    const signIn = await fetch(`${base}/auth/sign-in/email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN },
      body: JSON.stringify({ email: admin.email, password: admin.password }),
    });
    const cookie = signIn.headers
      .getSetCookie()
      .map((c) => c.split(';')[0] ?? '')
      .filter((c) => c && !c.endsWith('='))
      .join('; ');
    const headers = { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie };

    rx.respond = () => 'hang';
    const created = await fetch(`${base}/admin/webhooks`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ url: rx.url(), events: ['notification.created'] }),
    });
    expect(created.status).toBe(201);
    for (let i = 0; i < EVENTS; i++) {
      const res = await fetch(`${base}/admin/notifications/send`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          target: { scope: 'user', identifier: admin.id },
          notification: { type: 'announcement', title: `durable ${i}`, content: 'x' },
        }),
      });
      expect(res.status).toBe(200);
    }
    // Three sends in flight (leased by instance 0), the rest queued behind them.
    await rx.until((all) => all.length >= 3);
    const inFlight = new Set(rx.received.map((r) => r.id));
    await cluster.kill(0, 'SIGKILL');
    const before = await db.query<{ status: string; n: number }>(
      `select status, count(*)::int as n from webhook_delivery group by status`,
    );
    expect(before.rows).toEqual([{ status: 'pending', n: EVENTS }]);

    rx.respond = () => 200;
    await cluster.start(1);
    await rx.until(
      (all) => new Set(all.filter((r) => r.answered === 200).map((r) => r.id)).size >= EVENTS,
      60_000,
    );
    const ok = rx.received.filter((r) => r.answered === 200);
    const perId = new Map<string, number>();
    for (const r of ok) perId.set(r.id, (perId.get(r.id) ?? 0) + 1);
    expect(perId.size).toBe(EVENTS);
    for (const [id, n] of perId) expect(n, id).toBe(1);
    // The events cut off mid-send went out again under the same id.
    for (const id of inFlight) expect(perId.get(id)).toBe(1);
    expect(new Set(ok.map((r) => bodyOf(r).data.title)).size).toBe(EVENTS);

    let after: Array<{ status: string; n: number }> = [];
    for (let i = 0; i < 100; i++) {
      after = (
        await db.query<{ status: string; n: number }>(
          `select status, count(*)::int as n from webhook_delivery group by status`,
        )
      ).rows;
      if (after.length === 1 && after[0]?.status === 'delivered') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(after).toEqual([{ status: 'delivered', n: EVENTS }]);
  });
});
