// Revocation convergence across two real server processes (docs/architecture.md "Revocation convergence"): a
// ban issued while the bus is degraded never reaches the other instance as a message, yet the banned user's
// chat socket there can neither write (each write re-checks the session, against PostgreSQL while the store is
// down) nor stay open once the bus recovers (every local socket is re-validated).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';
import { type ChatClient, openChat } from '../helpers/ws-client.js';

const ADMIN_EMAIL = `rv-admin-${randomUUID().slice(0, 8)}@example.test`;

describe('revocation reaches open chat sockets on other instances despite a degraded bus', () => {
  let cluster: TestCluster;
  let admin: { id: string; cookie: string };
  const clients: ChatClient[] = [];
  const open = async (i: number, cookie?: string) => {
    const c = await openChat(`ws://127.0.0.1:${cluster.port(i)}/chat`, { cookie, origin: CLUSTER_ORIGIN });
    clients.push(c);
    return c;
  };
  const ban = (userId: string) =>
    fetch(`${cluster.url(0)}/auth/admin/ban-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: admin.cookie },
      body: JSON.stringify({ userId }),
    });
  const history = async () => {
    const res = await fetch(`${cluster.url(0)}/chat/history?limit=100`, {
      headers: { cookie: admin.cookie },
    });
    return ((await res.json()) as { messages: Array<{ message: string }> }).messages.map((m) => m.message);
  };

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      // Keep the periodic re-checks out of the way (chat pings, and the SSE keep-alive tick, whose convergence
      // pass would end the stream from PostgreSQL during the outage): this test is about the write check and bus
      // recovery.
      env: {
        ADMIN_EMAILS: ADMIN_EMAIL,
        LOG_LEVEL: 'warn',
        WS_PING_INTERVAL_MS: '600000',
        SSE_KEEPALIVE_MS: '600000',
      },
    });
    admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, name: 'Admin' });
  }, 90_000);
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await cluster?.close();
  });

  it('a user banned during a store outage cannot post on the other instance and is closed after recovery', async () => {
    const writer = await createVerifiedUserOn(cluster, 1, { name: 'Writer' });
    const idle = await createVerifiedUserOn(cluster, 1, { name: 'Idle' });
    const writerSocket = await open(1, writer.cookie);
    const idleSocket = await open(1, idle.cookie);
    // Both sessions have been checked once while healthy (so a cached "live" answer exists to go stale).
    const warm = randomUUID();
    writerSocket.send({ type: 'send_message', message: 'before the outage', clientMessageId: warm });
    await writerSocket.next('new_message', (e) => e.message?.clientMessageId === warm);

    await cluster.redis.stop();
    await Promise.all([cluster.waitForHealth(0, 'degraded'), cluster.waitForHealth(1, 'degraded')]);
    expect((await ban(writer.id)).status).toBe(200);
    expect((await ban(idle.id)).status).toBe(200);

    // The disconnect message could not cross instances: the sockets on instance 1 are still open. The first
    // write re-checks the session (in PostgreSQL, the store being down) and closes the socket instead.
    writerSocket.send({
      type: 'send_message',
      message: 'posted after my ban',
      clientMessageId: randomUUID(),
    });
    expect(await writerSocket.closed).toMatchObject({ code: 1008 });
    expect(idleSocket.ws.readyState).toBe(idleSocket.ws.OPEN);

    // The idle socket never writes: bus recovery re-validates it.
    await cluster.redis.start();
    await cluster.waitForHealth(1, 'ok');
    expect((await idleSocket.closed).code).toBe(1008);
    expect(await history()).not.toContain('posted after my ban');
  }, 90_000);

  it('a notification stream of a user banned during an outage ends once the bus recovers', async () => {
    const user = await createVerifiedUserOn(cluster, 1, { name: 'Streamer' });
    const stream: SseClient = await openStream(cluster.url(1), user.cookie);
    try {
      await stream.waitFor((e) => e.event === 'connected');
      await cluster.redis.stop();
      await Promise.all([cluster.waitForHealth(0, 'degraded'), cluster.waitForHealth(1, 'degraded')]);
      expect((await ban(user.id)).status).toBe(200);
      expect(stream.isEnded()).toBe(false);
      await cluster.redis.start();
      await cluster.waitForHealth(1, 'ok');
      const err = await stream.waitFor((e) => e.event === 'error', 20_000);
      expect(err.data).toMatchObject({ code: 'SESSION_REVOKED' });
      await stream.ended;
    } finally {
      stream.close();
    }
  }, 90_000);
});
