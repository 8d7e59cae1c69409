// The SDK against a real Herald process (server/test/helpers/cluster.ts: real PostgreSQL, Redis, SMTP capture):
// accounts through client.auth with a cookie-keeping fetch, the notification calls, the live feed (an admin
// broadcast arrives live; after a server restart the feed resumes from its cursor without duplicates), chat sends
// and their clientMessageId deduplication, and sign-out ending the feed.

import {
  CLUSTER_ORIGIN,
  startCluster,
  startReceiver,
  type TestCluster,
  tokenFrom,
  verifySignature,
} from '@herald/server/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { BroadcastChannelCtor, FeedEvent } from '../src/feed.js';
import {
  createCookieFetch,
  createHeraldClient,
  type HeraldClient,
  type WebSocketLike,
} from '../src/index.js';
import { FakeEnvironment, FakeLocks, waitFor } from './fakes.js';

/** The SDK's cookie-keeping fetch, recording the headers of each stream request it sends. */
function cookieJar() {
  const streamRequests: Headers[] = [];
  const recording: typeof fetch = (input, init = {}) => {
    if (String(input).endsWith('/notification/stream')) streamRequests.push(new Headers(init.headers));
    return fetch(input, init);
  };
  const jar = createCookieFetch({ origin: CLUSTER_ORIGIN, fetch: recording });
  return { fetch: jar.fetch, header: jar.cookieHeader, streamRequests };
}

interface Person {
  client: HeraldClient;
  jar: ReturnType<typeof cookieJar>;
  env: FakeEnvironment;
  email: string;
  password: string;
  id: string;
}

let cluster: TestCluster;
const suffix = Math.random().toString(36).slice(2, 8);
const adminEmail = `admin-${suffix}@example.test`;
const people: Person[] = [];

/** `wrap` sits between the SDK and the cookie jar (a test holds some requests back with it). */
function makeClient(
  wrap: (f: typeof fetch) => typeof fetch = (f) => f,
): Omit<Person, 'email' | 'password' | 'id'> {
  const jar = cookieJar();
  const env = new FakeEnvironment();
  const openSocket = (url: string) =>
    new WebSocket(url, {
      headers: { cookie: jar.header(), origin: CLUSTER_ORIGIN },
    }) as unknown as WebSocketLike;
  const client = createHeraldClient({
    baseURL: cluster.url(0),
    fetch: wrap(jar.fetch),
    WebSocket: openSocket,
    locks: null,
    BroadcastChannel: null,
    environment: env,
    feed: { baseDelayMs: 100, maxDelayMs: 1000 },
    chat: { baseDelayMs: 100, maxDelayMs: 1000 },
  });
  return { client, jar, env };
}

/** Sign-up → verification email → verify → sign-in, all through client.auth. */
async function signUp(email: string, wrap?: (f: typeof fetch) => typeof fetch): Promise<Person> {
  const { client, jar, env } = makeClient(wrap);
  const password = 'correct horse battery';
  const up = await client.auth.signUp.email({ email, password, name: email.split('@')[0] ?? 'x' });
  expect(up.error).toBeNull();
  const early = await client.auth.signIn.email({ email, password });
  expect(early.error?.status).toBe(403);
  expect(early.error?.code).toBe('EMAIL_NOT_VERIFIED');
  const mail = await cluster.smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('Verify'));
  const verified = await client.auth.verifyEmail({ query: { token: tokenFrom(mail, 'verify-email') } });
  expect(verified.error).toBeNull();
  const signedIn = await client.auth.signIn.email({ email, password });
  expect(signedIn.error).toBeNull();
  const session = await client.auth.getSession();
  const id = session.data?.user.id;
  if (!id) throw new Error('no session after sign-in');
  const person = { client, jar, env, email, password, id };
  people.push(person);
  return person;
}

beforeAll(async () => {
  cluster = await startCluster({
    instances: 1,
    redis: 'shared',
    // The webhook receiver of the admin test listens on loopback, refused unless this is set.
    env: { ADMIN_EMAILS: adminEmail, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_QUEUE_POLL_MS: '200' },
  });
});

afterAll(async () => {
  for (const p of people) p.client.close();
  await cluster?.close();
});

describe('SDK against a real Herald', () => {
  let admin: Person;
  let user: Person;
  const events: FeedEvent[] = [];

  it('signs up, verifies and signs in through client.auth', async () => {
    admin = await signUp(adminEmail);
    user = await signUp(`user-${suffix}@example.test`);
    const session = await admin.client.auth.getSession();
    expect(session.data?.user.role).toBe('admin');
  });

  it('the feed receives an admin broadcast live; the notification calls work', async () => {
    const feed = user.client.notifications.feed;
    feed.onEvent((e) => events.push(e));
    feed.start();
    await waitFor(() => feed.getState().status === 'open' && feed.getState().unreadCount === 0, 'feed open');

    const result = await admin.client.admin.sendNotification(
      {
        target: { scope: 'user', identifier: user.email },
        notification: { type: 'announcement', title: 'Hi', content: 'Live' },
      },
      { idempotencyKey: `k-${suffix}` },
    );
    expect(result).toMatchObject({ targetCount: 1, createdCount: 1, skippedCount: 0, failures: [] });
    await waitFor(
      () => feed.getState().items.length === 1 && feed.getState().unreadCount === 1,
      'live event',
    );
    const [live] = feed.getState().items;
    expect(live).toMatchObject({ title: 'Hi', content: 'Live', read: false, userId: user.id });

    const api = user.client.notifications;
    const list = await api.list({ filter: 'unread' });
    expect(list.notifications.map((n) => n.id)).toEqual([live?.id]);
    expect(list.pagination).toMatchObject({ page: 1, totalCount: 1 });
    expect((await api.counts()).counts.byStatus).toEqual({ all: 1, read: 0, unread: 1 });
    expect(await api.unreadCount()).toBe(1);
    const read = await api.setRead(live?.id ?? '', true);
    expect(read.read).toBe(true);
    await waitFor(() => feed.getState().unreadCount === 0 && feed.getState().items[0]?.read === true);
    expect(await api.markAllRead()).toBe(0);
    const prefs = await api.updatePreferences({ emailEnabled: false });
    expect(prefs.emailEnabled).toBe(false);
    expect((await api.getPreferences()).emailEnabled).toBe(false);
    expect(typeof (await api.heartbeat())).toBe('number');
    await expect(api.remove('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({
      name: 'HeraldApiError',
      status: 404,
      code: 'NOT_FOUND',
    });
    // Non-admins are refused the admin routes with the contract's error.
    await expect(user.client.admin.metrics()).rejects.toMatchObject({ status: 403 });
    expect((await admin.client.admin.metrics()).instanceId).toBe(cluster.instanceId(0));
  });

  it('two tabs of one browser share one stream: the leader feeds the follower, which takes over', async () => {
    const locks = new FakeLocks();
    const jar = cookieJar();
    const tabs = [0, 1].map(() =>
      createHeraldClient({
        baseURL: cluster.url(0),
        fetch: jar.fetch,
        locks,
        BroadcastChannel: globalThis.BroadcastChannel as unknown as BroadcastChannelCtor,
        environment: new FakeEnvironment(),
        feed: { baseDelayMs: 100, maxDelayMs: 1000 },
      }),
    );
    const [a, b] = tabs as [HeraldClient, HeraldClient];
    try {
      expect((await a.auth.signIn.email({ email: user.email, password: user.password })).error).toBeNull();
      a.notifications.feed.start();
      await waitFor(() => a.notifications.feed.getState().status === 'open', 'leader open');
      b.notifications.feed.start();
      await waitFor(() => b.notifications.feed.getState().items.length === 1, 'follower snapshot');
      await admin.client.admin.sendNotification({
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'mention', title: 'Both tabs', content: 'one stream' },
      });
      await waitFor(() => b.notifications.feed.getState().items[0]?.title === 'Both tabs', 'follower event');
      expect(a.notifications.feed.getState().items[0]?.title).toBe('Both tabs');
      expect(jar.streamRequests).toHaveLength(1);

      // The leader tab goes away: the follower connects, resuming from the last id it saw.
      const lastSeen = b.notifications.feed.getState().lastEventId;
      a.close();
      await waitFor(() => jar.streamRequests.length === 2, 'takeover');
      expect(jar.streamRequests[1]?.get('last-event-id')).toBe(lastSeen);
      await waitFor(() => b.notifications.feed.getState().status === 'open');
      await admin.client.admin.sendNotification({
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'info', title: 'After takeover', content: 'x' },
      });
      await waitFor(() => b.notifications.feed.getState().items[0]?.title === 'After takeover', 'new leader');
      // The main feed of this user saw both as well; mark them read so later counts start from 0.
      await user.client.notifications.markAllRead();
      await user.client.notifications.remove(b.notifications.feed.getState().items[0]?.id ?? '');
      await user.client.notifications.remove(b.notifications.feed.getState().items[1]?.id ?? '');
    } finally {
      for (const t of tabs) t.close();
    }
  });

  it('resumes from its cursor after the server restarts: missed events once, no duplicates', async () => {
    const feed = user.client.notifications.feed;
    const cursor = feed.getState().lastEventId;
    expect(cursor).not.toBeNull();
    const requestsBefore = user.jar.streamRequests.length;
    const chat = user.client.chat;
    chat.connect();
    await waitFor(() => chat.getState().status === 'open', 'chat open');
    // Keep the feed away while the server restarts and events happen, so they can only arrive by replay.
    user.env.fire('offline');
    await cluster.kill(0, 'SIGTERM');
    // Sent while the server is down: it must be stored once the socket is back.
    const whileDown = chat.send('sent while the server was down', { clientMessageId: `down-${suffix}` });
    // start() waits 30 s for health; a cold start on a loaded 2-core machine may need longer.
    const started = cluster.start(0).catch(() => undefined);
    await cluster.waitForHealth(0, 'ok', 150_000);
    await started;
    await waitFor(() => feed.getState().status === 'offline');
    for (const title of ['While away 1', 'While away 2']) {
      await admin.client.admin.sendNotification({
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'info', title, content: 'replayed' },
      });
    }
    const seenBefore = events.length;
    user.env.fire('online');
    await waitFor(() => feed.getState().items.length === 3 && feed.getState().status === 'open', 'replay');
    const resumed = user.jar.streamRequests.slice(requestsBefore);
    expect(resumed[0]?.get('last-event-id')).toBe(cursor);
    const connected = events.slice(seenBefore).find((e) => e.type === 'connected');
    expect(connected).toMatchObject({ type: 'connected', resumed: true, resync: false });
    // Two new_notification and two unread_count_changed events were missed.
    expect(connected?.type === 'connected' && connected.replayed).toBeGreaterThanOrEqual(4);
    const ids = feed.getState().items.map((n) => n.id);
    expect(new Set(ids).size).toBe(ids.length);
    const server = await user.client.notifications.list();
    expect(ids).toEqual(server.notifications.map((n) => n.id));
    expect(feed.getState().unreadCount).toBe(await user.client.notifications.unreadCount());
    // One before, two during the two-tab test, two replayed: each exactly once.
    expect(events.filter((e) => e.type === 'new_notification')).toHaveLength(5);

    const stored = await whileDown;
    expect(stored).toMatchObject({
      message: 'sent while the server was down',
      clientMessageId: `down-${suffix}`,
    });
    expect(chat.getState().messages.filter((m) => m.clientMessageId === `down-${suffix}`)).toHaveLength(1);
  }, 180_000);

  it('chat: send resolves with the stored message; a repeated clientMessageId is stored once', async () => {
    const chat = user.client.chat;
    await waitFor(() => chat.getState().status === 'open', 'chat open');
    expect(chat.getState()).toMatchObject({
      role: 'member',
      userId: user.id,
      instanceId: cluster.instanceId(0),
    });
    const cmid = `cmid-${suffix}`;
    const stored = await chat.send('hello from the SDK', { clientMessageId: cmid });
    expect(stored).toMatchObject({ message: 'hello from the SDK', userId: user.id, clientMessageId: cmid });
    const again = await chat.send('hello from the SDK', { clientMessageId: cmid });
    expect(again.id).toBe(stored.id);
    await chat.loadOlder(100);
    expect(chat.getState().messages.filter((m) => m.clientMessageId === cmid)).toHaveLength(1);
    const res = await user.jar.fetch(`${cluster.url(0)}/chat/history?limit=100`);
    const body = (await res.json()) as { messages: Array<{ clientMessageId?: string }> };
    expect(body.messages.filter((m) => m.clientMessageId === cmid)).toHaveLength(1);
    await expect(chat.send('two\nlines')).rejects.toMatchObject({ code: 'MESSAGE_MULTILINE' });

    // This one and the one sent while the server was down.
    expect(await admin.client.admin.purgeMessages(user.id)).toBe(2);
    await waitFor(() => chat.getState().messages.every((m) => m.userId !== user.id), 'messages_purged');
  });

  it('admin.apiKeys and admin.webhooks manage keys and webhooks (CONTRACT §9) with the contract’s errors', async () => {
    const keys = admin.client.admin.apiKeys;
    const created = await keys.create({ name: `sdk-${suffix}`, scopes: ['metrics:read'] });
    expect(created).toMatchObject({ name: `sdk-${suffix}`, scopes: ['metrics:read'], createdBy: admin.id });
    expect(created.key).toMatch(/^hk_/);
    expect(created.key.startsWith(created.prefix)).toBe(true);
    const listed = (await keys.list()).find((k) => k.id === created.id);
    expect(listed).toBeDefined();
    expect(listed).not.toHaveProperty('key');
    const withKey = () =>
      fetch(`${cluster.url(0)}/metrics`, {
        headers: { authorization: `Bearer ${created.key}`, accept: 'application/json' },
      });
    expect((await withKey()).status).toBe(200);
    await keys.revoke(created.id);
    expect((await withKey()).status).toBe(401);
    expect((await keys.list()).map((k) => k.id)).not.toContain(created.id);
    await expect(keys.revoke(created.id)).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
    await expect(user.client.admin.apiKeys.list()).rejects.toMatchObject({ status: 403, code: 'FORBIDDEN' });

    const hooks = admin.client.admin.webhooks;
    await expect(
      hooks.create({ url: 'ftp://example.test/hook', events: ['user.created'] }),
    ).rejects.toMatchObject({
      status: 400,
      code: 'VALIDATION_ERROR',
      details: [expect.objectContaining({ path: 'body.url' })],
    });
    const receiver = await startReceiver();
    try {
      const hook = await hooks.create({ url: receiver.url(), events: ['user.created'], description: 'sdk' });
      expect(hook.secret).toMatch(/^whsec_/);
      expect((await hooks.list()).find((w) => w.id === hook.id)).not.toHaveProperty('secret');
      expect(await hooks.update(hook.id, { enabled: false })).toMatchObject({ id: hook.id, enabled: false });
      expect(await hooks.update(hook.id, { enabled: true, description: null })).toMatchObject({
        enabled: true,
        description: null,
      });

      const eventId = await hooks.sendTest(hook.id);
      await receiver.until((all) => all.some((r) => r.id === eventId));
      const first = receiver.received.find((r) => r.id === eventId);
      expect(first && verifySignature(hook.secret, first)).toBe(true);
      // The delivery is marked delivered just after the receiver answered: read the list until it says so.
      let delivery = (await hooks.deliveries(hook.id, { limit: 10 })).find((d) => d.id === eventId);
      for (let i = 0; i < 100 && delivery?.status !== 'delivered'; i++) {
        await new Promise((r) => setTimeout(r, 100));
        delivery = (await hooks.deliveries(hook.id, { limit: 10 })).find((d) => d.id === eventId);
      }
      expect(delivery).toMatchObject({
        type: 'webhook.test',
        status: 'delivered',
        statusCode: 200,
        attempt: 1,
      });

      await hooks.redeliver(hook.id, eventId);
      await receiver.until((all) => all.filter((r) => r.id === eventId).length >= 2);
      await expect(hooks.redeliver(hook.id, 'msg_unknown')).rejects.toMatchObject({ status: 404 });

      const rotated = await hooks.rotateSecret(hook.id);
      expect(rotated).toMatch(/^whsec_/);
      expect(rotated).not.toBe(hook.secret);
      await hooks.remove(hook.id);
      expect((await hooks.list()).map((w) => w.id)).not.toContain(hook.id);
      await expect(hooks.deliveries(hook.id)).rejects.toMatchObject({ status: 404 });
    } finally {
      await receiver.close();
    }
  });

  it('sign-out waits for a request already sent, which is answered for the session it was sent under', async () => {
    // A list request leaves the SDK but is held back before it reaches the server; the sign-out starts meanwhile.
    // Were the sign-out sent at once, the list would reach the server after the session is gone and get a 401.
    let hold: Promise<void> | null = null;
    const order: string[] = [];
    const person = await signUp(`waiter-${suffix}@example.test`, (f) => async (input, init) => {
      const path = new URL(String(input instanceof Request ? input.url : input)).pathname;
      if (path === '/notification/list' && hold) await hold;
      order.push(path);
      return f(input, init);
    });
    let release = () => {};
    hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const list = person.client.notifications.list({ limit: 5 });
    const signedOut = person.client.auth.signOut();
    await new Promise((r) => setTimeout(r, 300));
    expect(order).not.toContain('/auth/sign-out');
    hold = null;
    release();
    await expect(list).resolves.toMatchObject({ notifications: [] });
    expect((await signedOut).error).toBeNull();
    expect(order.slice(-2)).toEqual(['/notification/list', '/auth/sign-out']);
    await expect(person.client.notifications.list({ limit: 5 })).rejects.toMatchObject({ status: 401 });
  });

  it('sign-out does not wait long for a request that hangs', async () => {
    let hang = false;
    const person = await signUp(`hanger-${suffix}@example.test`, (f) => async (input, init) => {
      const path = new URL(String(input instanceof Request ? input.url : input)).pathname;
      if (path === '/notification/list' && hang) return new Promise<Response>(() => {});
      return f(input, init);
    });
    hang = true;
    void person.client.notifications.list({ limit: 5 });
    const started = Date.now();
    expect((await person.client.auth.signOut()).error).toBeNull();
    // The wait is bounded (2 s); the request that never answers does not keep the user signed in.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
    hang = false;
    await expect(person.client.notifications.list({ limit: 5 })).rejects.toMatchObject({ status: 401 });
  });

  it('sign-out ends the feed (SESSION_REVOKED, no reconnect) and turns the chat socket into a guest', async () => {
    const feed = user.client.notifications.feed;
    const requests = user.jar.streamRequests.length;
    await user.client.auth.signOut();
    await waitFor(() => feed.getState().status === 'closed', 'feed closed');
    expect(feed.getState().error?.code).toBe('SESSION_REVOKED');
    await waitFor(() => user.client.chat.getState().role === 'guest', 'chat as guest');
    await new Promise((r) => setTimeout(r, 500));
    expect(user.jar.streamRequests.length).toBe(requests);
  });
});
