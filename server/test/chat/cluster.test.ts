// Chat across three real server processes sharing PostgreSQL and a private redis-server: cluster-wide presence,
// exactly-once fan-out, bans closing sockets everywhere, a store outage (local chat keeps working, recovery
// afterwards) and SIGTERM (clients get 1001).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { type ChatClient, type ChatEvent, openChat } from '../helpers/ws-client.js';

const ADMIN_EMAIL = `chat-admin-${randomUUID().slice(0, 8)}@example.test`;

describe('chat cluster (3 processes)', () => {
  let cluster: TestCluster;
  let alice: { id: string; cookie: string };
  let bob: { id: string; cookie: string };
  let admin: { id: string; cookie: string };
  const clients: ChatClient[] = [];
  const wsUrl = (i: number) => `ws://127.0.0.1:${cluster.port(i)}/chat`;
  const open = async (i: number, cookie?: string) => {
    const c = await openChat(wsUrl(i), { cookie, origin: CLUSTER_ORIGIN });
    clients.push(c);
    return c;
  };
  const closeAll = async () => {
    await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  };
  const send = (c: ChatClient, message: string) => {
    const clientMessageId = randomUUID();
    c.send({ type: 'send_message', message, clientMessageId });
    return clientMessageId;
  };
  const byCmid = (id: string) => (e: ChatEvent) => e.message?.clientMessageId === id;

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 3,
      env: { CHAT_THROTTLE_LIMIT: '1000', ADMIN_EMAILS: ADMIN_EMAIL, LOG_LEVEL: 'warn' },
    });
    [alice, bob, admin] = await Promise.all([
      createVerifiedUserOn(cluster, 0, { name: 'Alice' }),
      createVerifiedUserOn(cluster, 1, { name: 'Bob' }),
      createVerifiedUserOn(cluster, 2, { email: ADMIN_EMAIL, name: 'Admin' }),
    ]);
  }, 90_000);
  afterAll(async () => {
    await closeAll();
    await cluster?.close();
  });

  it('counts presence across processes (guests per connection, users once per role)', async () => {
    const g0 = await open(0);
    const g1 = await open(1);
    await open(1, alice.cookie);
    await open(2, alice.cookie);
    const ad = await open(2, admin.cookie);
    expect(ad.log[0]).toMatchObject({ role: 'admin', instanceId: cluster.instanceId(2) });
    const expected = (e: ChatEvent) => e.guests === 2 && e.members === 1 && e.admins === 1;
    await Promise.all([g0, g1, ad].map((c) => c.next('presence', expected)));
    await closeAll();
  });

  it('delivers a message sent on one instance to the others exactly once', async () => {
    const sender = await open(0, alice.cookie);
    const on1 = await open(1);
    const on2 = await open(2, bob.cookie);
    const id = send(sender, 'hello cluster');
    const [e1, e2, e0] = await Promise.all([
      on1.next('new_message', byCmid(id)),
      on2.next('new_message', byCmid(id)),
      sender.next('new_message', byCmid(id)),
    ]);
    expect(e1.message).toEqual(e0.message);
    expect(e2.message).toEqual(e0.message);
    const marker = send(sender, 'marker');
    await Promise.all([on1, on2].map((c) => c.next('new_message', byCmid(marker))));
    for (const c of [on1, on2]) {
      expect(c.log.filter((e) => e.type === 'new_message' && e.message.id === e0.message.id)).toHaveLength(1);
    }
    await closeAll();
  });

  it('closes a banned user’s sockets on every instance', async () => {
    const target = await createVerifiedUserOn(cluster, 0);
    const sockets = await Promise.all([0, 1, 2].map((i) => open(i, target.cookie)));
    const peer = await open(0);
    const res = await fetch(`${cluster.url(1)}/auth/admin/ban-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: admin.cookie },
      body: JSON.stringify({ userId: target.id }),
    });
    expect(res.status).toBe(200);
    const codes = await Promise.all(sockets.map((s) => s.closed.then((c) => c.code)));
    expect(codes).toEqual([1008, 1008, 1008]);
    await peer.next('user_disconnected', (e) => e.userId === target.id);
    await closeAll();
  });

  it('keeps local chat working while Redis is down and recovers after it returns', async () => {
    const a0 = await open(0, alice.cookie);
    const b0 = await open(0, bob.cookie);
    const on1 = await open(1);
    await cluster.redis.stop();
    await cluster.waitForHealth(0, 'degraded');
    // Same instance: still delivered (history in PostgreSQL, fan-out local, throttle local).
    const during = send(a0, 'while redis is down');
    await b0.next('new_message', byCmid(during));
    const hist = await fetch(`${cluster.url(0)}/chat/history?limit=5`, { headers: { cookie: bob.cookie } });
    expect(hist.status).toBe(200);
    expect(((await hist.json()) as { messages: Array<{ message: string }> }).messages.at(-1)?.message).toBe(
      'while redis is down',
    );

    await cluster.redis.start();
    await Promise.all([0, 1].map((i) => cluster.waitForHealth(i, 'ok')));
    const after = send(a0, 'after recovery');
    await on1.next('new_message', byCmid(after));
    await closeAll();
  });

  it('closes sockets with 1001 on SIGTERM', async () => {
    const c = await open(2);
    const m = await open(2, bob.cookie);
    const exit = cluster.kill(2, 'SIGTERM');
    expect((await c.closed).code).toBe(1001);
    expect((await m.closed).code).toBe(1001);
    expect((await exit).code).toBe(0);
  });
});
