// Exactly-once, in-order delivery of notification events across real instances (issue: events published out
// of order were dropped as duplicates; resume covered only new notifications; large change sets were lost on
// other instances; notifications created while the bus was degraded never reached other instances' streams).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLUSTER_ORIGIN,
  createVerifiedUserOn,
  FAST_TIMINGS,
  startCluster,
  type TestCluster,
} from '../helpers/cluster.js';
import { openStream, type SseClient, type SseEvent } from '../helpers/sse-client.js';

const LOGGED = new Set([
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
]);

interface Note {
  id: string;
  title: string;
  read: boolean;
}

/** A client's view built only from events, as a front end would keep it. */
function applyEvents(state: { notes: Map<string, Note>; unread: number }, events: SseEvent[]) {
  for (const e of events) {
    if (e.event === 'new_notification' || e.event === 'notification_updated') {
      const n = e.data.notification as Note;
      state.notes.set(n.id, { id: n.id, title: n.title, read: n.read });
    } else if (e.event === 'notification_deleted') {
      state.notes.delete(e.data.notificationId as string);
    } else if (e.event === 'notifications_cleared') {
      state.notes.clear();
    } else if (e.event === 'unread_count_changed') {
      state.unread = e.data.unreadCount as number;
    }
  }
  return state;
}

/** Every logged event exactly once: ids strictly consecutive from the first. */
function expectContiguous(events: SseEvent[], from: number) {
  const ids = events.filter((e) => LOGGED.has(e.event)).map((e) => Number(e.id));
  expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => from + i + 1));
}

describe('exactly-once notification events across instances', () => {
  let cluster: TestCluster;
  let admin: { cookie: string };
  const clients: SseClient[] = [];

  const json = { 'content-type': 'application/json', origin: CLUSTER_ORIGIN };
  const send = async (i: number, email: string, title: string, extra: Record<string, unknown> = {}) => {
    const res = await fetch(`${cluster.url(i)}/admin/notifications/send`, {
      method: 'POST',
      headers: { ...json, cookie: admin.cookie },
      body: JSON.stringify({
        target: { scope: 'user', identifier: email },
        notification: { type: 'info', title, content: `content of ${title}`, ...extra },
      }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const call = async (i: number, method: string, path: string, cookie: string, body?: unknown) => {
    const res = await fetch(`${cluster.url(i)}${path}`, {
      method,
      headers: body === undefined ? { origin: CLUSTER_ORIGIN, cookie } : { ...json, cookie },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    expect(res.status, `${method} ${path}`).toBe(200);
    return res.json() as Promise<Record<string, unknown>>;
  };
  const stream = async (i: number, cookie: string, lastEventId?: string) => {
    const c = await openStream(cluster.url(i), cookie, { lastEventId });
    clients.push(c);
    await c.waitFor((e) => e.event === 'connected');
    return c;
  };

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: { ...FAST_TIMINGS, ADMIN_EMAILS: 'chief@example.test', EMAIL_QUEUE_POLL_MS: '100' },
    });
    admin = await createVerifiedUserOn(cluster, 0, { email: 'chief@example.test' });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await cluster?.close();
  });

  it('concurrent sends on one and on two instances reach every stream exactly once, in seq order', async () => {
    const user = await createVerifiedUserOn(cluster, 1);
    const streams = [
      await stream(0, user.cookie),
      await stream(0, user.cookie),
      await stream(1, user.cookie),
    ];
    const start = Number(streams[0]?.events[0]?.id);
    await Promise.all(Array.from({ length: 10 }, (_, i) => send(0, user.email, `one-${i}`)));
    await Promise.all(Array.from({ length: 60 }, (_, i) => send(i % 2, user.email, `two-${i}`)));
    for (const s of streams) {
      await s.waitFor((e) => e.event === 'unread_count_changed' && e.data.unreadCount === 70, 20_000);
      const titles = s.events
        .filter((e) => e.event === 'new_notification')
        .map((e) => (e.data.notification as Note).title);
      expect(titles).toHaveLength(70);
      expect(new Set(titles).size).toBe(70);
      expectContiguous(s.events, start);
    }
  });

  it('resume replays reads, deletes and clears made on another instance, so the client ends equal', async () => {
    const user = await createVerifiedUserOn(cluster, 0);
    const first = await stream(0, user.cookie);
    await send(1, user.email, 'before-1');
    await send(1, user.email, 'before-2');
    await first.waitFor((e) => e.event === 'unread_count_changed' && e.data.unreadCount === 2);
    const state = applyEvents({ notes: new Map(), unread: 0 }, first.events);
    const lastId = first.events.at(-1)?.id;
    first.close();
    await first.ended;

    // Away: another device reads, deletes, creates and marks all read, on the other instance.
    const [keep, drop] = [...state.notes.keys()];
    await call(1, 'PATCH', `/notification/${keep}/read`, user.cookie, { read: true });
    await call(1, 'DELETE', `/notification/${drop}`, user.cookie);
    await send(1, user.email, 'while-away-1');
    await send(0, user.email, 'while-away-2');
    await call(1, 'PATCH', `/notification/${keep}/read`, user.cookie, { read: false });
    await call(1, 'PATCH', '/notification/mark-all-read', user.cookie);

    const back = await stream(1, user.cookie, lastId);
    const connected = back.events[0];
    expect(connected?.data).toMatchObject({ resumed: true, resync: false });
    const replayed = connected?.data.replayed as number;
    // read(2) + delete(2) + two creates(4) + unread(2) + mark-all-read of 3 (+1)
    expect(replayed).toBe(14);
    await back.waitFor((_e) => back.events.length >= 1 + replayed);
    expectContiguous(back.events, Number(lastId));
    applyEvents(state, back.events);
    const list = await call(0, 'GET', '/notification/list?limit=100', user.cookie);
    const server = (list.notifications as Note[]).map((n) => ({ id: n.id, title: n.title, read: n.read }));
    expect([...state.notes.values()].sort((a, b) => a.id.localeCompare(b.id))).toEqual(
      server.sort((a, b) => a.id.localeCompare(b.id)),
    );
    expect(state.unread).toBe((await call(0, 'GET', '/notification/unread-count', user.cookie)).unreadCount);
    const cursor = back.events.at(-1)?.id;
    back.close();
    await back.ended;

    await call(0, 'DELETE', '/notification/delete-all', user.cookie);
    const again = await stream(0, user.cookie, cursor);
    await again.waitFor((e) => e.event === 'notifications_cleared');
    expect(again.events[0]?.data).toMatchObject({ resumed: true, replayed: 1, resync: false });
    expect(applyEvents(state, again.events).notes.size).toBe(0);
  });

  it('a cursor the server never issued resyncs instead of silencing the stream', async () => {
    const user = await createVerifiedUserOn(cluster, 0);
    await send(0, user.email, 'existing');
    for (const [i, bad] of ['999999999999999', 'garbage'].entries()) {
      const s = await stream(1, user.cookie, bad);
      expect(s.events[0]?.data).toMatchObject({
        resumed: false,
        replayed: 0,
        resync: true,
        unreadCount: 1 + i,
      });
      await send(0, user.email, `live after ${bad}`);
      const ev = await s.waitFor((e) => e.event === 'new_notification');
      expect((ev.data.notification as Note).title).toBe(`live after ${bad}`);
      s.close();
    }
  });

  it('mark-all-read of large notifications reaches streams on another instance in full', async () => {
    const user = await createVerifiedUserOn(cluster, 0);
    const big = { metadata: { data: { blob: 'y'.repeat(15_000) } } };
    for (let i = 0; i < 12; i++)
      await send(0, user.email, `large-${i}`, { ...big, content: 'z'.repeat(5000) });
    const s = await stream(1, user.cookie);
    const from = Number(s.events[0]?.id);
    await call(0, 'PATCH', '/notification/mark-all-read', user.cookie);
    await s.waitFor((e) => e.event === 'unread_count_changed' && e.data.unreadCount === 0);
    expect(s.events.filter((e) => e.event === 'notification_updated')).toHaveLength(12);
    expectContiguous(s.events, from);
  });

  it('notifications created while the bus is degraded reach other instances once it recovers', async () => {
    const user = await createVerifiedUserOn(cluster, 0);
    const s = await stream(1, user.cookie);
    const from = Number(s.events[0]?.id);
    await cluster.redis.stop();
    await Promise.all([cluster.waitForHealth(0, 'degraded'), cluster.waitForHealth(1, 'degraded')]);
    await send(0, user.email, 'during outage');
    await cluster.redis.start();
    await Promise.all([cluster.waitForHealth(0, 'ok'), cluster.waitForHealth(1, 'ok')]);
    const ev = await s.waitFor((e) => e.event === 'new_notification', 15_000);
    expect((ev.data.notification as Note).title).toBe('during outage');
    await s.waitFor((e) => e.event === 'unread_count_changed');
    expectContiguous(s.events, from);
  });
});
