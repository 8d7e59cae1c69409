import { afterEach, describe, expect, it } from 'vitest';
import { applyFeedEvent, type FeedState, initialFeedState } from '../src/feed.js';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import { FakeEnvironment, FakeHerald, notification, tick, waitFor } from './fakes.js';

const BASE = 'http://herald.test';
let clients: HeraldClient[] = [];

function setup(feed: { baseDelayMs?: number; maxDelayMs?: number; staleAfterMs?: number } = {}) {
  const server = new FakeHerald();
  const env = new FakeEnvironment();
  const client = createHeraldClient({
    baseURL: BASE,
    fetch: (input, init) => server.fetch(input, init),
    locks: null,
    BroadcastChannel: null,
    environment: env,
    random: () => 0.5,
    feed: { baseDelayMs: 5, maxDelayMs: 20, healthyAfterMs: 0, ...feed },
  });
  clients.push(client);
  return { server, env, client, feed: client.notifications.feed };
}

const connected = (extra: Record<string, unknown> = {}) => ({
  type: 'connected',
  userId: 'u1',
  unreadCount: 0,
  timestamp: 1,
  resumed: false,
  replayed: 0,
  resync: false,
  ...extra,
});

afterEach(() => {
  for (const c of clients) c.close();
  clients = [];
});

describe('feed reducer', () => {
  it('prepends, replaces, removes, empties and sets the count', () => {
    const page = 3;
    let s: FeedState = { ...initialFeedState, items: [notification('b'), notification('a')] };
    s = applyFeedEvent(s, { type: 'new_notification', notification: notification('c') }, page);
    expect(s.items.map((n) => n.id)).toEqual(['c', 'b', 'a']);
    // A duplicate (replayed) new_notification does not show twice; the page stays bounded.
    s = applyFeedEvent(s, { type: 'new_notification', notification: notification('c') }, page);
    s = applyFeedEvent(s, { type: 'new_notification', notification: notification('d') }, page);
    expect(s.items.map((n) => n.id)).toEqual(['d', 'c', 'b']);
    s = applyFeedEvent(
      s,
      { type: 'notification_updated', notification: notification('c', { read: true }) },
      page,
    );
    expect(s.items.find((n) => n.id === 'c')?.read).toBe(true);
    s = applyFeedEvent(s, { type: 'notification_deleted', notificationId: 'b' }, page);
    expect(s.items.map((n) => n.id)).toEqual(['d', 'c']);
    s = applyFeedEvent(s, { type: 'unread_count_changed', unreadCount: 7 }, page);
    expect(s.unreadCount).toBe(7);
    s = applyFeedEvent(s, { type: 'notifications_cleared', deletedCount: 2 }, page);
    expect(s.items).toEqual([]);
  });
});

describe('notification feed over a fake stream', () => {
  it('loads the list on the first connect, then applies live events (split anywhere) and reports them', async () => {
    const { server, feed } = setup();
    server.items = [notification('a')];
    server.unread = 1;
    const seen: string[] = [];
    feed.onEvent((e) => seen.push(e.type));
    feed.start();
    const stream = await waitFor(() => server.streams[0], 'stream');
    expect(stream.headers.get('last-event-id')).toBeNull();
    stream.event(1, connected({ unreadCount: 1 }), 7);
    await waitFor(
      () => feed.getState().status === 'open' && server.listCalls === 1 && feed.getState().items.length,
    );
    expect(feed.getState().items.map((n) => n.id)).toEqual(['a']);
    stream.event(2, { type: 'new_notification', notification: notification('b') }, 30);
    stream.event(3, { type: 'unread_count_changed', unreadCount: 2 });
    await waitFor(() => feed.getState().unreadCount === 2);
    expect(feed.getState().items.map((n) => n.id)).toEqual(['b', 'a']);
    expect(feed.getState().lastEventId).toBe('3');
    expect(seen).toEqual(['connected', 'new_notification', 'unread_count_changed']);
  });

  it('reconnects after the stream ends, resumes with Last-Event-ID, and refetches only on resync', async () => {
    const { server, feed } = setup();
    feed.start();
    const first = await waitFor(() => server.streams[0]);
    first.event(10, connected());
    await waitFor(() => server.listCalls === 1 && server.countCalls === 1);
    first.event(11, { type: 'new_notification', notification: notification('x') });
    await waitFor(() => feed.getState().lastEventId === '11');
    first.end();

    const second = await waitFor(() => server.streams[1], 'reconnect');
    expect(second.headers.get('last-event-id')).toBe('11');
    second.event(12, connected({ resumed: true, replayed: 1 }));
    second.event(12, { type: 'notification_deleted', notificationId: 'x' });
    await waitFor(() => feed.getState().items.length === 0 && feed.getState().status === 'open');
    await tick(20);
    // A resumed stream replays what was missed: no refetch.
    expect(server.listCalls).toBe(1);

    second.end();
    const third = await waitFor(() => server.streams[2], 'second reconnect');
    expect(third.headers.get('last-event-id')).toBe('12');
    server.items = [notification('fresh')];
    third.event(30, connected({ resync: true, unreadCount: 1 }));
    await waitFor(() => server.listCalls === 2 && feed.getState().items[0]?.id === 'fresh');
    expect(feed.getState().resyncs).toBe(1);
  });

  it('reconnects after SHUTTING_DOWN, but stops on SESSION_REVOKED without a reconnect storm', async () => {
    const { server, feed } = setup();
    feed.start();
    const first = await waitFor(() => server.streams[0]);
    first.event(1, connected());
    first.event(1, { type: 'error', code: 'SHUTTING_DOWN', message: 'restarting' });
    first.end();
    const second = await waitFor(() => server.streams[1]);
    second.event(2, connected({ resumed: true }));
    second.event(2, { type: 'error', code: 'SESSION_REVOKED', message: 'The session ended' });
    second.end();
    await waitFor(() => feed.getState().status === 'closed');
    expect(feed.getState().error).toEqual({ code: 'SESSION_REVOKED', message: 'The session ended' });
    // Many backoff windows later, still no new request.
    await tick(100);
    expect(server.streams).toHaveLength(2);
  });

  it('stops on a 401 answer and starts over on the next start()', async () => {
    const { server, feed } = setup();
    server.streamStatus = [401];
    feed.start();
    await waitFor(() => feed.getState().status === 'closed');
    expect(feed.getState().error?.code).toBe('UNAUTHORIZED');
    await tick(60);
    expect(server.streams).toHaveLength(1);
    feed.start();
    const again = await waitFor(() => server.streams[1]);
    again.event(1, connected());
    await waitFor(() => feed.getState().status === 'open');
    expect(feed.getState().error).toBeNull();
  });

  it('retries other failures with backoff', async () => {
    const { server, feed } = setup();
    server.streamStatus = [503, 503];
    feed.start();
    const s = await waitFor(() => server.streams[2], 'third attempt');
    // Never open yet: still "connecting" (not "reconnecting") while it retries.
    expect(feed.getState().status).toBe('connecting');
    s.event(1, connected());
    await waitFor(() => feed.getState().status === 'open');
  });

  it('pauses while offline and resumes from the last id when back online', async () => {
    const { server, env, feed } = setup();
    feed.start();
    const first = await waitFor(() => server.streams[0]);
    first.event(5, connected());
    await waitFor(() => feed.getState().status === 'open');
    env.fire('offline');
    await waitFor(() => feed.getState().status === 'offline');
    expect(first.aborted).toBe(true);
    await tick(60);
    expect(server.streams).toHaveLength(1);
    env.fire('online');
    const second = await waitFor(() => server.streams[1], 'reconnect when online');
    expect(second.headers.get('last-event-id')).toBe('5');
  });

  it('does not start a stream while offline at start', async () => {
    const { server, env, feed } = setup();
    env.online = false;
    feed.start();
    await waitFor(() => feed.getState().status === 'offline');
    await tick(30);
    expect(server.streams).toHaveLength(0);
    env.fire('online');
    await waitFor(() => server.streams[0]);
  });

  it('reconnects at once when the tab becomes visible after a disconnect', async () => {
    // A backoff window of minutes: only the visibility change can explain a prompt reconnect.
    const { server, env, feed } = setup({ baseDelayMs: 600_000, maxDelayMs: 600_000 });
    feed.start();
    const first = await waitFor(() => server.streams[0]);
    first.event(1, connected());
    await waitFor(() => feed.getState().status === 'open');
    first.end();
    await waitFor(() => feed.getState().status === 'reconnecting');
    await tick(30);
    expect(server.streams).toHaveLength(1);
    env.visible = false;
    env.fire('visible');
    const second = await waitFor(() => server.streams[1], 'reconnect on visible');
    expect(second.headers.get('last-event-id')).toBe('1');
  });

  it('replaces a silent (dead) connection', async () => {
    const { server, feed } = setup({ staleAfterMs: 50 });
    feed.start();
    const first = await waitFor(() => server.streams[0]);
    first.event(1, connected());
    await waitFor(() => server.streams[1], 'replacement after silence');
    expect(first.aborted).toBe(true);
  });

  it('stop() aborts the stream and keeps the cursor for the next start', async () => {
    const { server, feed } = setup();
    feed.start();
    const first = await waitFor(() => server.streams[0]);
    first.event(9, connected());
    await waitFor(() => feed.getState().lastEventId === '9');
    feed.stop();
    expect(first.aborted).toBe(true);
    expect(feed.getState().status).toBe('closed');
    feed.start();
    const second = await waitFor(() => server.streams[1]);
    expect(second.headers.get('last-event-id')).toBe('9');
  });

  it('events that arrive during a refetch are kept on top of its result', async () => {
    const { server, feed } = setup();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const fetchImpl = server.fetch;
    server.fetch = async (input, init) => {
      if (String(input).includes('/notification/list')) await gate;
      return fetchImpl(input, init);
    };
    server.items = [notification('old')];
    feed.start();
    const s = await waitFor(() => server.streams[0]);
    s.event(1, connected());
    await tick(10);
    s.event(2, { type: 'new_notification', notification: notification('live') });
    await waitFor(() => feed.getState().items.length === 1);
    release();
    await waitFor(() => feed.getState().items.length === 2);
    expect(feed.getState().items.map((n) => n.id)).toEqual(['live', 'old']);
  });
});
