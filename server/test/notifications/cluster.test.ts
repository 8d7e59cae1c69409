// Real server processes sharing PostgreSQL and Redis: a stream on instance 1 receives a notification sent
// through instance 0, and the user (online on instance 1 only) gets no email.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLUSTER_ORIGIN,
  createVerifiedUserOn,
  FAST_TIMINGS,
  startCluster,
  type TestCluster,
} from '../helpers/cluster.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';

describe('notifications across real instances', () => {
  let cluster: TestCluster;
  const clients: SseClient[] = [];

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: { ...FAST_TIMINGS, ADMIN_EMAILS: 'boss@example.test', EMAIL_QUEUE_POLL_MS: '100' },
    });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await cluster?.close();
  });

  it('delivers over SSE on another instance and sends no email', async () => {
    const admin = await createVerifiedUserOn(cluster, 0, { email: 'boss@example.test' });
    const user = await createVerifiedUserOn(cluster, 1);
    const stream = await openStream(cluster.url(1), user.cookie);
    clients.push(stream);
    await stream.waitFor((e) => e.event === 'connected');
    // Presence is published debounced (PRESENCE_DEBOUNCE_MS = 50 here); there is no event to await from
    // outside the processes, so give it a few debounce periods.
    await new Promise((r) => setTimeout(r, 400));
    const res = await fetch(`${cluster.url(0)}/admin/notifications/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: admin.cookie },
      body: JSON.stringify({
        target: { scope: 'user', identifier: user.email },
        notification: { type: 'mention', title: 'across instances', content: 'sent via instance 0' },
      }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ targetCount: 1, createdCount: 1 });
    const ev = await stream.waitFor((e) => e.event === 'new_notification');
    const notification = ev.data.notification as { id: string; title: string };
    expect(notification.title).toBe('across instances');
    // The email strategy queues synchronously within the request, so an empty outbox now means no email.
    const client = new pg.Client({ connectionString: cluster.db.url });
    await client.connect();
    try {
      const { rows } = await client.query('select 1 from email_outbox where dedupe_key = $1', [
        `notification:${notification.id}`,
      ]);
      expect(rows).toEqual([]);
    } finally {
      await client.end();
    }
  });
});
