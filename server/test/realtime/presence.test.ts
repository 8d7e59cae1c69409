// Presence and user disconnection between two in-process instances of one deployment (shared Redis, one key
// prefix): cluster-wide online checks in batches, touch repairing a lost entry, debounced chat counts, the
// fan-out of disconnectUser, and shutdown removing the instance's presence at once.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import type { PresenceCounts, UserDisconnect } from '../../src/realtime/types.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { TEST_REDIS_URL } from '../helpers/env.js';

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('presence across two instances', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let raw: Redis;
  beforeAll(async () => {
    env = await createTestEnv({ PRESENCE_DEBOUNCE_MS: '100', HEARTBEAT_INTERVAL_MS: '200' });
    a = await env.app({ INSTANCE_ID: 'pres-a' });
    b = await env.app({ INSTANCE_ID: 'pres-b' });
    raw = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    raw?.disconnect();
    await env?.close();
  });

  it('answers isOnline and onlineAmong cluster-wide, ref-counting local connections', async () => {
    const pa = a.ctx.realtime.presence;
    const pb = b.ctx.realtime.presence;
    const release1 = pa.userConnected('alice');
    const release2 = pa.userConnected('alice');
    await until('alice visible from b', async () => ((await pb.isOnline('alice')) ? true : undefined));
    const many = Array.from({ length: 2500 }, (_, i) => `nobody-${i}`);
    const found = await pb.onlineAmong([...many, 'alice', 'alice']);
    expect([...found]).toEqual(['alice']);
    release1();
    release1(); // releasing twice is harmless
    expect(await pb.isOnline('alice')).toBe(true);
    release2();
    await until('alice gone', async () => ((await pb.isOnline('alice')) ? undefined : true));
    expect(await pa.isOnline('alice')).toBe(false);
  });

  it('lists every user online on a live instance, each once, and forgets released ones', async () => {
    const pa = a.ctx.realtime.presence;
    const pb = b.ctx.realtime.presence;
    const releases = [pa.userConnected('list-1'), pa.userConnected('list-2'), pb.userConnected('list-2')];
    releases.push(pb.userConnected('list-3'));
    const mine = (ids: string[]) => ids.filter((id) => id.startsWith('list-')).sort();
    await until('all three listed from a', async () =>
      mine(await pa.onlineUsers()).length === 3 ? true : undefined,
    );
    expect(mine(await pa.onlineUsers())).toEqual(['list-1', 'list-2', 'list-3']);
    expect(mine(await pb.onlineUsers())).toEqual(['list-1', 'list-2', 'list-3']);
    for (const release of releases) release();
    await until('all released', async () => (mine(await pb.onlineUsers()).length === 0 ? true : undefined));
    expect(mine(await pa.onlineUsers())).toEqual([]);
  });

  it('touch re-asserts a live local stream lost from the store', async () => {
    const pa = a.ctx.realtime.presence;
    const release = pa.userConnected('bob');
    const key = `${env.prefix}rt:presence:pres-a:online`;
    await until('bob stored', async () => ((await raw.sismember(key, 'bob')) ? true : undefined));
    await raw.srem(key, 'bob');
    expect(await b.ctx.realtime.presence.isOnline('bob')).toBe(false);
    await pa.touch('bob');
    await until('bob back', async () => ((await b.ctx.realtime.presence.isOnline('bob')) ? true : undefined));
    release();
  });

  it('broadcasts debounced chat counts with distinct members and per-connection guests', async () => {
    const seen: PresenceCounts[] = [];
    const off = b.ctx.realtime.presence.onChatCounts((c) => seen.push(c));
    const pa = a.ctx.realtime.presence;
    const pb = b.ctx.realtime.presence;
    // A burst of 30 changes collapses into a few notifications.
    for (let i = 0; i < 10; i++) pa.chatJoin(`g${i}`, 'guest', null);
    for (let i = 0; i < 10; i++) pa.chatJoin(`m${i}`, 'member', 'carol');
    for (let i = 0; i < 10; i++) pb.chatJoin(`n${i}`, i % 2 ? 'member' : 'admin', i % 2 ? 'carol' : 'dave');
    const final = await until('final counts', () => {
      const last = seen.at(-1);
      return last && last.guests === 10 && last.members === 1 && last.admins === 1 ? last : undefined;
    });
    expect(final).toEqual({ guests: 10, members: 1, admins: 1 });
    expect(seen.length).toBeLessThan(10);
    expect(await pa.chatCounts()).toEqual(final);
    expect(pa.localChatConnections()).toBe(20);
    for (let i = 0; i < 10; i++) pa.chatLeave(`g${i}`);
    pa.chatLeave('unknown-connection');
    await until('guests left', () => (seen.at(-1)?.guests === 0 ? true : undefined));
    off();
  });

  it('fans disconnectUser out to every instance, including the caller, and drops invalid events', async () => {
    const onA: UserDisconnect[] = [];
    const onB: UserDisconnect[] = [];
    const offA = a.ctx.realtime.onUserDisconnect((e) => onA.push(e));
    const offB = b.ctx.realtime.onUserDisconnect((e) => onB.push(e));
    await a.ctx.realtime.disconnectUser({ userId: 'eve', reason: 'banned' });
    expect(onA).toEqual([{ userId: 'eve', reason: 'banned' }]);
    await until('remote disconnect', () => (onB.length > 0 ? true : undefined));
    expect(onB).toEqual([{ userId: 'eve', reason: 'banned' }]);
    await a.ctx.realtime.bus.publish('rt.user.disconnect', { userId: 42 });
    await a.ctx.realtime.disconnectUser({ userId: 'eve', reason: 'signed_out', sessionId: 's1' });
    await until('second remote disconnect', () => (onB.length > 1 ? true : undefined));
    expect(onB[1]).toEqual({ userId: 'eve', reason: 'signed_out', sessionId: 's1' });
    expect(onA).toHaveLength(2);
    offA();
    offB();
  });

  it('removes an instance and its presence as soon as it closes', async () => {
    const c = await env.app({ INSTANCE_ID: 'pres-c' });
    c.ctx.realtime.presence.userConnected('frank');
    await until('frank visible', async () =>
      (await a.ctx.realtime.presence.isOnline('frank')) ? true : undefined,
    );
    await until('c registered', async () =>
      (await a.ctx.realtime.instances?.())?.some((r) => r.instanceId === 'pres-c') ? true : undefined,
    );
    await c.close();
    expect(await a.ctx.realtime.presence.isOnline('frank')).toBe(false);
    expect((await a.ctx.realtime.instances?.())?.map((r) => r.instanceId)).toEqual(['pres-a', 'pres-b']);
  });
});
