// Tabs sharing one stream: Web Locks (a fake LockManager: Node has none) elect the leader, Node's real
// BroadcastChannel carries the leader's events to the followers.
import { afterEach, describe, expect, it } from 'vitest';
import type { BroadcastChannelCtor } from '../src/feed.js';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import { FakeEnvironment, FakeHerald, FakeLocks, notification, tick, waitFor } from './fakes.js';

const BASE = 'http://herald.test';
let clients: HeraldClient[] = [];

afterEach(() => {
  for (const c of clients) c.close();
  clients = [];
});

function tab(server: FakeHerald, locks: FakeLocks | null, BC: BroadcastChannelCtor | null = NodeBC) {
  const client = createHeraldClient({
    baseURL: BASE,
    fetch: (input, init) => server.fetch(input, init),
    locks,
    BroadcastChannel: BC,
    environment: new FakeEnvironment(),
    random: () => 0.5,
    feed: { baseDelayMs: 5, maxDelayMs: 20, healthyAfterMs: 0 },
  });
  clients.push(client);
  return client.notifications.feed;
}

const NodeBC = globalThis.BroadcastChannel as unknown as BroadcastChannelCtor;

const connected = {
  type: 'connected',
  userId: 'u1',
  unreadCount: 1,
  timestamp: 1,
  resumed: false,
  replayed: 0,
  resync: false,
};

describe('one stream per browser', () => {
  it('the lock holder streams, followers get its events and a snapshot, and take over with the last id', async () => {
    const server = new FakeHerald();
    server.items = [notification('a')];
    server.unread = 1;
    const locks = new FakeLocks();
    const leader = tab(server, locks);
    leader.start();
    const s1 = await waitFor(() => server.streams[0]);
    s1.event(1, connected);
    await waitFor(() => leader.getState().items.length === 1);

    // A second tab opens: it asks for a snapshot instead of connecting.
    const follower = tab(server, locks);
    const toasts: string[] = [];
    follower.onEvent((e) => toasts.push(e.type));
    follower.start();
    await waitFor(() => follower.getState().items.length === 1 && follower.getState().status === 'open');
    expect(follower.getState().unreadCount).toBe(1);

    s1.event(2, { type: 'new_notification', notification: notification('b') });
    s1.event(3, { type: 'unread_count_changed', unreadCount: 2 });
    await waitFor(() => follower.getState().unreadCount === 2);
    expect(follower.getState().items.map((n) => n.id)).toEqual(['b', 'a']);
    expect(follower.getState().lastEventId).toBe('3');
    expect(toasts).toEqual(['new_notification', 'unread_count_changed']);
    await tick(20);
    // Still a single stream, and the follower fetched nothing itself.
    expect(server.streams).toHaveLength(1);
    expect(server.listCalls).toBe(1);

    // The leader tab closes: the follower gets the lock and resumes from the last event id it saw.
    leader.stop();
    const s2 = await waitFor(() => server.streams[1], 'takeover stream');
    expect(s2.headers.get('last-event-id')).toBe('3');
    s2.event(4, { ...connected, resumed: true, unreadCount: 2 });
    s2.event(5, { type: 'notification_deleted', notificationId: 'a' });
    await waitFor(() => follower.getState().items.length === 1);
    expect(follower.getState().status).toBe('open');
    // Its state was complete already: no refetch after taking over.
    expect(server.listCalls).toBe(1);
  });

  it('a follower that stops while waiting gives up its place in the lock queue', async () => {
    const server = new FakeHerald();
    const locks = new FakeLocks();
    const leader = tab(server, locks);
    leader.start();
    const s1 = await waitFor(() => server.streams[0]);
    s1.event(1, connected);
    const follower = tab(server, locks);
    follower.start();
    await waitFor(() => follower.getState().status === 'open');
    follower.stop();
    leader.stop();
    await tick(30);
    expect(server.streams).toHaveLength(1);
    expect(locks.isHeld(`herald:feed:${BASE}`)).toBe(false);
  });

  it('outside a page (Node) clients do not share by default, even where navigator.locks exists', async () => {
    const had = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
    Object.defineProperty(globalThis, 'navigator', { value: { locks: new FakeLocks() }, configurable: true });
    try {
      const server = new FakeHerald();
      for (let i = 0; i < 2; i++) {
        const client = createHeraldClient({
          baseURL: BASE,
          fetch: (input, init) => server.fetch(input, init),
          environment: new FakeEnvironment(),
        });
        clients.push(client);
        client.notifications.feed.start();
      }
      await waitFor(() => server.streams.length === 2, 'one stream per client');
    } finally {
      if (had) Object.defineProperty(globalThis, 'navigator', had);
      else Reflect.deleteProperty(globalThis, 'navigator');
    }
  });

  it('without Web Locks or BroadcastChannel every tab has its own stream', async () => {
    const server = new FakeHerald();
    tab(server, null).start();
    tab(server, new FakeLocks(), null).start();
    await waitFor(() => server.streams.length === 2);
  });
});
