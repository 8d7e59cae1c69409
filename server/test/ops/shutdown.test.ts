// Graceful shutdown of a real process: SIGTERM → health 503 first, chat sockets told (1001), phases logged in
// contract order, presence removed and the instance deregistered at once (no waiting for the dead timeout),
// exit code 0. A second signal forces the exit.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CLUSTER_ORIGIN, startCluster, type TestCluster } from '../helpers/cluster.js';

const KEY = 'k'.repeat(40);

describe('graceful shutdown', () => {
  let cluster: TestCluster;
  let raw: Redis;
  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      // Long dead timeout: the instance can only disappear from the registry by deregistering itself.
      env: { METRICS_API_KEY: KEY, DEAD_INSTANCE_MS: '60000', REGISTRY_TTL_MS: '60000' },
      envFor: (i): Record<string, string> => (i === 1 ? { SHUTDOWN_DRAIN_MS: '1500' } : {}),
    });
    raw = new Redis(cluster.redisUrl);
  });
  afterAll(async () => {
    raw?.disconnect();
    await cluster?.close();
  });

  const activeInstances = async (i: number) => {
    const res = await fetch(`${cluster.url(i)}/metrics`, { headers: { authorization: `Bearer ${KEY}` } });
    return ((await res.json()) as { cluster: { activeInstances: number } }).cluster.activeInstances;
  };

  it('SIGTERM: 503 first, sockets told, ordered phases, deregistered, exit 0', async () => {
    const user = `u-${randomUUID()}`;
    const post = await fetch(`${cluster.url(1)}/__test/realtime/online`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ handle: 'h', userId: user }),
    });
    expect(post.status).toBe(200);
    expect(await activeInstances(0)).toBe(2);
    const onlineKey = `${cluster.prefix}rt:presence:${cluster.instanceId(1)}:online`;
    expect(await raw.sismember(onlineKey, user)).toBe(1);

    const socket = new WebSocket(`ws://127.0.0.1:${cluster.port(1)}/chat`, {
      headers: { origin: CLUSTER_ORIGIN },
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));

    const exit = cluster.kill(1, 'SIGTERM');
    // Health turns 503 while the process drains, before anything is closed.
    let sawShuttingDown = false;
    while (cluster.isRunning(1)) {
      try {
        const res = await fetch(`${cluster.url(1)}/health`);
        if (res.status === 503) {
          expect(await res.json()).toEqual({ status: 'shutting_down' });
          sawShuttingDown = true;
          break;
        }
      } catch {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(sawShuttingDown).toBe(true);
    expect(await closed).toBe(1001);
    expect(await exit).toEqual({ code: 0, signal: null });

    const messages = cluster.jsonLogs(1).map((l) => String(l.msg));
    const sequence = messages.filter(
      (m) => m === 'shutting down' || m.startsWith('shutdown ') || m === 'instance deregistered',
    );
    expect(sequence).toEqual([
      'shutting down',
      'shutdown phase stop-accepting',
      'shutdown phase drain-requests',
      'shutdown phase notify-clients',
      'shutdown phase close-connections',
      'shutdown phase remove-presence',
      'shutdown phase deregister',
      'instance deregistered',
      'shutdown phase close-pools',
      'shutdown complete',
    ]);

    // Gone from the registry and presence at once, long before the (60 s) dead timeout.
    expect(await activeInstances(0)).toBe(1);
    expect(await raw.zscore(`${cluster.prefix}rt:instances`, cluster.instanceId(1))).toBeNull();
    expect(await raw.exists(onlineKey)).toBe(0);
  });

  it('a second signal forces the exit', async () => {
    // A drain far longer than the test: only the second signal can end this process quickly.
    await cluster.start(1, 'ok', { SHUTDOWN_DRAIN_MS: '30000', SHUTDOWN_TIMEOUT_MS: '60000' });
    const from = cluster.logs(1).length;
    const exit = cluster.kill(1, 'SIGTERM');
    await cluster.waitForLog(1, /"msg":"shutdown phase stop-accepting"/, 15_000, from);
    await cluster.kill(1, 'SIGTERM');
    expect((await exit).code).toBe(1);
    expect(cluster.logs(1).some((l) => l.includes('second signal: forcing exit'))).toBe(true);
  });
});
