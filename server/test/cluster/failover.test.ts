// A master of the private Redis Cluster is SIGKILLed while two Herald instances carry chat and notification
// traffic. Its replica is promoted; both instances reconnect, resubscribe and leave degraded mode on their own;
// an SSE client that resumes with Last-Event-ID ends with every notification exactly once, and chat crosses
// instances again. The time from the kill until all of that holds is printed (docs/performance.md).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busChannels, channelFor } from '../../src/realtime/keys.js';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import type { TestRedisCluster } from '../helpers/redis-cluster.js';
import { openStream, type SseClient, type SseEvent } from '../helpers/sse-client.js';
import { type ChatClient, type ChatEvent, openChat } from '../helpers/ws-client.js';

const ADMIN_EMAIL = `fo-admin-${randomUUID().slice(0, 8)}@example.test`;
const METRICS_KEY = 'failover-metrics-key-0123456789abcdef012';

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Redis Cluster master failover under traffic', () => {
  let cluster: TestCluster;
  let rc: TestRedisCluster;
  const chats: ChatClient[] = [];
  const streams: SseClient[] = [];

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      redis: 'cluster',
      env: {
        ADMIN_EMAILS: ADMIN_EMAIL,
        METRICS_API_KEY: METRICS_KEY,
        CHAT_THROTTLE_LIMIT: '100000',
        LOG_LEVEL: 'warn',
      },
    });
    if (!cluster.redisCluster) throw new Error('expected a Redis Cluster');
    rc = cluster.redisCluster;
  }, 180_000);
  afterAll(async () => {
    for (const s of streams) s.close();
    await Promise.allSettled(chats.map((c) => c.close()));
    await cluster?.close();
  });

  const status = async (i: number) => {
    try {
      const res = await fetch(`${cluster.url(i)}/metrics`, {
        headers: { authorization: `Bearer ${METRICS_KEY}` },
      });
      return (await res.json()) as {
        pubsub: { isDegraded: boolean };
        bus: { degradedTransitions: number };
        cluster: { activeInstances: number };
      };
    } catch {
      return undefined;
    }
  };

  it('recovers: resubscribed, out of degraded mode, every notification once after resume, chat across', async () => {
    const [admin, user, alice, bob] = await Promise.all([
      createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL }),
      createVerifiedUserOn(cluster, 1),
      createVerifiedUserOn(cluster, 0),
      createVerifiedUserOn(cluster, 1),
    ]);
    const open = async (i: number, cookie: string) => {
      const c = await openChat(`ws://127.0.0.1:${cluster.port(i)}/chat`, { cookie, origin: CLUSTER_ORIGIN });
      chats.push(c);
      return c;
    };
    const a = await open(0, alice.cookie);
    const b = await open(1, bob.cookie);
    const first = await openStream(cluster.url(1), user.cookie);
    streams.push(first);
    await first.waitFor((e) => e.event === 'connected');

    // Kill the master that carries this user's notification channel, so the failover hits the traffic.
    const channel = channelFor(
      busChannels(`${cluster.prefix}rt:bus`),
      'notifications.events',
      { userId: user.id },
      '',
    );
    const slot = Number((await rc.cli(rc.ports[0] ?? 0, 'cluster', 'keyslot', channel)).trim());
    const owner = (await rc.nodes()).find(
      (n) =>
        n.role === 'master' &&
        n.slots.some((range) => {
          const [lo, hi] = range.split('-').map(Number);
          return lo !== undefined && slot >= lo && slot <= (hi ?? lo);
        }),
    );
    if (!owner) throw new Error(`no master owns slot ${slot}`);

    const sent: string[] = [];
    const failures: number[] = [];
    let traffic = true;
    const notifications = (async () => {
      for (let n = 0; traffic; n++) {
        const title = `n-${n}`;
        const res = await fetch(`${cluster.url(0)}/admin/notifications/send`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: admin.cookie },
          body: JSON.stringify({
            target: { scope: 'user', identifier: user.email },
            notification: { type: 'info', title, content: 'during failover' },
          }),
        }).catch(() => undefined);
        if (res?.status === 200) sent.push(title);
        else failures.push(res?.status ?? 0);
        await delay(100);
      }
    })();
    const chatter = (async () => {
      for (let n = 0; traffic; n++) {
        a.send({ type: 'send_message', message: `chat ${n}`, clientMessageId: randomUUID() });
        await delay(100);
      }
    })();

    await delay(1_000);
    const killedAt = Date.now();
    await rc.killMaster(owner.port);
    const { newMasterPort } = await rc.waitForFailover(owner.port);
    const promotedAfterMs = Date.now() - killedAt;

    // Recovered: both instances out of degraded mode and a chat message crossing instances again.
    let recoveredAfterMs = 0;
    for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
      const s = await Promise.all([status(0), status(1)]);
      if (s.every((x) => x && !x.pubsub.isDegraded && x.cluster.activeInstances === 2)) {
        const probe = randomUUID();
        a.send({ type: 'send_message', message: 'after failover', clientMessageId: probe });
        const crossed = await b
          .next('new_message', (e: ChatEvent) => e.message?.clientMessageId === probe, 2_000)
          .then(() => true)
          .catch(() => false);
        if (crossed) {
          recoveredAfterMs = Date.now() - killedAt;
          break;
        }
      }
      await delay(100);
    }
    traffic = false;
    await Promise.all([notifications, chatter]);
    expect(recoveredAfterMs).toBeGreaterThan(0);
    const transitions = (await Promise.all([status(0), status(1)])).map((x) => x?.bus.degradedTransitions);
    console.log(
      `failover: replica on ${newMasterPort} promoted after ${promotedAfterMs} ms; instances recovered (not degraded, chat across) after ${recoveredAfterMs} ms; degraded transitions per instance ${transitions.join('/')}; ${sent.length} notifications sent, ${failures.length} refused`,
    );
    expect(failures).toEqual([]);

    // The stream resumes (on the other instance) from the last event it saw: every notification exactly once.
    const titles = (events: SseEvent[]) =>
      events
        .filter((e) => e.event === 'new_notification')
        .map((e) => (e.data.notification as { title: string }).title);
    const lastId = [...first.events].reverse().find((e) => e.id !== undefined)?.id;
    first.close();
    const resumed = await openStream(cluster.url(0), user.cookie, { lastEventId: lastId });
    streams.push(resumed);
    const last = sent[sent.length - 1];
    const seen = () => [...titles(first.events), ...titles(resumed.events)];
    if (last && !seen().includes(last)) {
      await resumed.waitFor(
        (e) => e.event === 'new_notification' && (e.data.notification as { title: string }).title === last,
        20_000,
      );
    }
    await delay(300);
    const all = seen();
    expect(all.sort()).toEqual([...sent].sort());
    expect(new Set(all).size).toBe(all.length);

    await rc.restartNode(owner.port);
  }, 240_000);
});
