// Three real server processes on one private Redis: cross-instance delivery, dedup, hostile messages,
// cluster-wide presence, degraded mode with recovery, and dead-instance cleanup after SIGKILL.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '../helpers/cluster.js';

const KEY = 'k'.repeat(40);
const auth = { authorization: `Bearer ${KEY}` };

interface Metrics {
  instanceId: string;
  pubsub: { messagesReceived: number; isDegraded: boolean; averageLatencyMs: number; maxLatencyMs: number };
  cluster: { activeInstances: number; instances: Array<{ instanceId: string; connectedClients: number }> };
  bus: { malformedDropped: number; duplicatesDropped: number };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
}

describe('real-time core across three processes', () => {
  let cluster: TestCluster;
  let raw: Redis;
  const get = async <T>(i: number, path: string): Promise<T> => {
    const res = await fetch(`${cluster.url(i)}${path}`, { headers: auth });
    if (res.status !== 200) throw new Error(`${path} → ${res.status}`);
    return (await res.json()) as T;
  };
  const post = async (i: number, path: string, body: unknown) => {
    const res = await fetch(`${cluster.url(i)}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
  };
  const received = async (i: number) =>
    (
      await get<{ received: Array<{ id: string; instanceId: string; payload: { tag?: string } }> }>(
        i,
        '/__test/realtime/received',
      )
    ).received;
  const receivedTag = async (i: number, tag: string) =>
    (await received(i)).filter((m) => m.payload?.tag === tag);
  const metrics = (i: number) => get<Metrics>(i, '/metrics');
  const presence = (i: number, ids: string[]) =>
    get<{ online: string[]; counts: { guests: number; members: number; admins: number } }>(
      i,
      `/__test/realtime/presence?userIds=${ids.join(',')}`,
    );

  beforeAll(async () => {
    cluster = await startCluster({ instances: 3, env: { METRICS_API_KEY: KEY } });
    raw = new Redis(cluster.redisUrl, { maxRetriesPerRequest: 1, retryStrategy: () => 200 });
    raw.on('error', () => {});
  });
  afterAll(async () => {
    raw?.disconnect();
    await cluster?.close();
  });

  it('delivers a publish to every instance once, locally at once and without echo', async () => {
    const tag = randomUUID();
    await post(0, '/__test/realtime/publish', { payload: { tag } });
    expect(await receivedTag(0, tag)).toHaveLength(1);
    for (const i of [1, 2]) {
      const got = await until(`delivery on ${i}`, async () => {
        const list = await receivedTag(i, tag);
        return list.length > 0 ? list : undefined;
      });
      expect(got).toHaveLength(1);
      expect(got[0]?.instanceId).toBe(cluster.instanceId(0));
    }
    const m = await metrics(1);
    expect(m.pubsub.messagesReceived).toBeGreaterThan(0);
    expect(m.pubsub.maxLatencyMs).toBeGreaterThanOrEqual(m.pubsub.averageLatencyMs);
    expect(m.cluster.activeInstances).toBe(3);
    expect(m.cluster.instances.map((r) => r.instanceId)).toEqual([0, 1, 2].map((i) => cluster.instanceId(i)));
    // The one echo of instance 0's own message came back through Redis and was skipped: still exactly once.
    expect(await receivedTag(0, tag)).toHaveLength(1);
  });

  it('drops a duplicated publish by message id but passes two messages about one entity', async () => {
    const channel = `${cluster.prefix}rt:bus`;
    const before = (await metrics(1)).bus.duplicatesDropped;
    const envelope = (tag: string) =>
      JSON.stringify({
        v: 1,
        id: randomUUID(),
        topic: 'test.echo',
        instanceId: 'outsider',
        sentAt: Date.now(),
        payload: { tag, entity: 1 },
      });
    const tag = randomUUID();
    const once = envelope(tag);
    await raw.publish(channel, once);
    await raw.publish(channel, once);
    await raw.publish(channel, envelope(tag));
    const got = await until('both distinct messages', async () => {
      const list = await receivedTag(1, tag);
      return list.length >= 2 ? list : undefined;
    });
    expect(got).toHaveLength(2);
    expect((await metrics(1)).bus.duplicatesDropped).toBe(before + 1);
  });

  it('drops hostile messages, counts them and keeps serving', async () => {
    const channel = `${cluster.prefix}rt:bus`;
    const before = (await metrics(2)).bus.malformedDropped;
    const base = {
      v: 1,
      id: randomUUID(),
      topic: 'test.echo',
      instanceId: 'x',
      sentAt: Date.now(),
      payload: {},
    };
    const hostile = [
      'not json',
      '[]',
      'null',
      JSON.stringify({ ...base, v: 2 }),
      JSON.stringify({ ...base, instanceId: '../../etc\npasswd' }),
      JSON.stringify({ ...base, topic: 'bad topic\u0000' }),
      JSON.stringify({ ...base, sentAt: 'yesterday' }),
      JSON.stringify({ ...base, payload: 'x'.repeat(300 * 1024) }),
    ];
    for (const message of hostile) await raw.publish(channel, message);
    await until('all counted', async () => {
      const m = await metrics(2);
      return m.bus.malformedDropped >= before + hostile.length ? m : undefined;
    });
    const health = await (await fetch(`${cluster.url(2)}/health`)).json();
    expect(health).toMatchObject({ status: 'ok' });
  });

  it('sees a user online on another instance and counts chat users once cluster-wide', async () => {
    const user = `u-${randomUUID()}`;
    const other = `u-${randomUUID()}`;
    await post(2, '/__test/realtime/online', { handle: 'h1', userId: user });
    const seen = await until('online elsewhere', async () => {
      const p = await presence(0, [user, other]);
      return p.online.includes(user) ? p : undefined;
    });
    expect(seen.online).toEqual([user]);

    // One member on two instances counts once; guests count per connection.
    await post(0, '/__test/realtime/chat-join', { connectionId: 'c1', role: 'member', userId: user });
    await post(1, '/__test/realtime/chat-join', { connectionId: 'c2', role: 'member', userId: user });
    await post(1, '/__test/realtime/chat-join', { connectionId: 'c3', role: 'guest', userId: null });
    await post(2, '/__test/realtime/chat-join', { connectionId: 'c4', role: 'guest', userId: null });
    await post(2, '/__test/realtime/chat-join', { connectionId: 'c5', role: 'admin', userId: other });
    const counts = await until('cluster chat counts', async () => {
      const p = await presence(0, []);
      return p.counts.guests === 2 && p.counts.admins === 1 ? p.counts : undefined;
    });
    expect(counts).toEqual({ guests: 2, members: 1, admins: 1 });

    await post(2, '/__test/realtime/offline', { handle: 'h1' });
    await until('offline everywhere', async () => {
      const p = await presence(1, [user]);
      return p.online.length === 0 ? true : undefined;
    });
  });

  it('degrades to local delivery while Redis is down and recovers on its own', async () => {
    const user = `u-${randomUUID()}`;
    await post(1, '/__test/realtime/online', { handle: 'h2', userId: user });
    await until('online before outage', async () =>
      (await presence(0, [user])).online.length ? true : undefined,
    );

    await cluster.redis.stop();
    await Promise.all([0, 1, 2].map((i) => cluster.waitForHealth(i, 'degraded')));
    expect((await metrics(0)).pubsub.isDegraded).toBe(true);

    const during = randomUUID();
    await post(0, '/__test/realtime/publish', { payload: { tag: during }, count: 5 });
    expect(await receivedTag(0, during)).toHaveLength(5);

    await cluster.redis.start();
    await Promise.all([0, 1, 2].map((i) => cluster.waitForHealth(i, 'ok', 20_000)));
    expect((await metrics(0)).pubsub.isDegraded).toBe(false);
    // Nothing published during the outage leaks to the others afterwards.
    expect(await receivedTag(1, during)).toHaveLength(0);

    const after = randomUUID();
    await post(0, '/__test/realtime/publish', { payload: { tag: after } });
    await until('delivery resumed', async () =>
      (await receivedTag(2, after)).length === 1 ? true : undefined,
    );
    // The restarted Redis is empty: instances re-registered and republished their presence.
    await until('presence republished', async () =>
      (await presence(0, [user])).online.length ? true : undefined,
    );
    await until('registry rebuilt', async () =>
      (await metrics(2)).cluster.activeInstances === 3 ? true : undefined,
    );
    // No process crashed or leaked a rejection at any point of the outage.
    for (const i of [0, 1, 2]) {
      expect(cluster.isRunning(i)).toBe(true);
      expect(cluster.logs(i).filter((l) => l.includes('unhandled rejection'))).toEqual([]);
    }
  });

  it('drops a SIGKILLed instance and its presence after the dead timeout', async () => {
    const user = `u-${randomUUID()}`;
    await post(2, '/__test/realtime/online', { handle: 'h3', userId: user });
    await post(2, '/__test/realtime/chat-join', { connectionId: 'k1', role: 'guest', userId: null });
    await until('visible', async () => ((await presence(0, [user])).online.length ? true : undefined));
    const guestsBefore = (await presence(0, [])).counts.guests;

    const exit = await cluster.kill(2, 'SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    const m = await until('dead instance dropped', async () => {
      const x = await metrics(0);
      return x.cluster.activeInstances === 2 ? x : undefined;
    });
    expect(m.cluster.instances.map((r) => r.instanceId)).toEqual([
      cluster.instanceId(0),
      cluster.instanceId(1),
    ]);
    expect((await presence(1, [user])).online).toEqual([]);
    await until('guests recounted', async () => {
      const p = await presence(1, []);
      return p.counts.guests < guestsBefore ? true : undefined;
    });
    // A survivor removed its registry entry (not just the key lifetime).
    await until('registry entry removed', async () =>
      (await raw.zscore(`${cluster.prefix}rt:instances`, cluster.instanceId(2))) === null ? true : undefined,
    );
  });
});
