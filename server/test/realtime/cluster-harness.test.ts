// The multi-instance harness itself: real processes, private Redis outage visible in /health, restart, cleanup.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';

describe('cluster harness', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster({ instances: 2 });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('runs each instance on its own port with its own id', async () => {
    const bodies = await Promise.all(
      [0, 1].map(
        async (i) => (await fetch(`${cluster.url(i)}/health`)).json() as Promise<{ instanceId: string }>,
      ),
    );
    expect(bodies.map((b) => b.instanceId)).toEqual([cluster.instanceId(0), cluster.instanceId(1)]);
  });

  it('signs a user up on one instance; the session works on another', async () => {
    const user = await createVerifiedUserOn(cluster, 0);
    const res = await fetch(`${cluster.url(1)}/auth/get-session`, { headers: { cookie: user.cookie } });
    const body = (await res.json()) as { user: { id: string } } | null;
    expect(body?.user.id).toBe(user.id);
  });

  it('shows a store outage as degraded and recovers when Redis returns', async () => {
    await cluster.redis.stop();
    await cluster.waitForHealth(0, 'degraded');
    await cluster.redis.start();
    await cluster.waitForHealth(0, 'ok');
    await cluster.waitForHealth(1, 'ok');
  });

  it('restarts an instance after SIGKILL', async () => {
    const exit = await cluster.kill(1, 'SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    expect(cluster.isRunning(1)).toBe(false);
    await cluster.start(1);
    expect(cluster.isRunning(1)).toBe(true);
  });
});
