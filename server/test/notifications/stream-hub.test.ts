// The SSE hub's connect sequence in isolation (stub repository, real HTTP response), for races the end-to-end
// tests cannot place deterministically.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyReply } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/guard.js';
import type { NotificationBusMessage } from '../../src/notifications/events.js';
import type { NotificationRepository } from '../../src/notifications/repository.js';
import type { Notification } from '../../src/notifications/schemas.js';
import { eventBody } from '../../src/notifications/stream-hub/order.js';
import { parseLastEventId } from '../../src/notifications/stream-hub/resume.js';
import {
  createStreamHub,
  newNotificationBodies,
  type StreamHub,
} from '../../src/notifications/stream-hub.js';
import type { Presence } from '../../src/realtime/types.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';

const USER = 'user-1';

type LogEvent = Awaited<ReturnType<NotificationRepository['eventsAfter']>>[number];

function notification(n: number): Notification {
  const at = new Date(Date.UTC(2030, 0, 1, 0, 0, n)).toISOString();
  return {
    id: `00000000-0000-0000-0000-${String(n).padStart(12, '0')}`,
    userId: USER,
    type: 'info',
    title: `n${n}`,
    content: 'c',
    metadata: {},
    read: false,
    createdAt: at,
    updatedAt: at,
  };
}

/** An in-memory event log standing in for PostgreSQL: `created(n)` appends what a create commits. */
function memoryLog() {
  const events: LogEvent[] = [];
  let unread = 0;
  const last = () => events.at(-1)?.seq ?? 0;
  return {
    events,
    created(n: number): LogEvent[] {
      unread++;
      const added: LogEvent[] = [
        { seq: last() + 1, name: 'new_notification', data: { notification: notification(n) } },
        { seq: last() + 2, name: 'unread_count_changed', data: { unreadCount: unread } },
      ];
      events.push(...added);
      return added;
    },
    repo: {
      cursor: async () => ({ lastSeq: last(), unread, oldestSeq: events[0]?.seq ?? null }),
      eventsAfter: async (_u: string, seq: number, limit: number) =>
        events.filter((e) => e.seq > seq).slice(0, limit),
      lastSeqs: async () => new Map([[USER, last()]]),
    } as unknown as NotificationRepository,
  };
}

const asBus = (userId: string, events: LogEvent[]): NotificationBusMessage => ({
  kind: 'user',
  userId,
  events: events.map((e) => ({ seq: e.seq, name: e.name, data: e.data ?? {} })),
});

describe('SSE hub ordering', () => {
  let server: http.Server | undefined;
  let client: SseClient | undefined;
  afterEach(async () => {
    client?.close();
    await new Promise((r) => server?.close(r));
  });

  /** Serves the hub on a loopback server; `onRegistered` runs when the hub registers the stream. */
  async function serve(
    repo: NotificationRepository,
    onRegistered: (hub: StreamHub) => void = () => {},
    overrides: Partial<Parameters<typeof createStreamHub>[0]> = {},
  ) {
    let hub: StreamHub;
    const presence = {
      userConnected: () => {
        onRegistered(hub);
        return () => {};
      },
    } as unknown as Presence;
    hub = createStreamHub({
      repo,
      presence,
      logger: pino({ level: 'silent' }),
      isSessionLive: async () => true,
      keepAliveMs: 60_000,
      maxBufferedBytes: 1 << 20,
      limits: { perUser: 10, perIp: 10, opensPerWindow: 100, openWindowMs: 60_000 },
      ...overrides,
    });
    const auth = {
      user: { id: USER },
      session: { id: 's1', expiresAt: new Date(Date.now() + 3_600_000) },
    } as unknown as AuthContext;
    server = http.createServer((req, res) => {
      const reply = { hijack: () => {}, getHeaders: () => ({}), raw: res } as unknown as FastifyReply;
      const raw = req.headers['last-event-id'];
      void hub.open(reply, auth, parseLastEventId(typeof raw === 'string' ? raw : undefined), '127.0.0.1');
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hub: () => hub };
  }

  const seqsOf = (c: SseClient, name: string) =>
    c.events.filter((e) => e.event === name).map((e) => Number(e.id));

  it('fresh connect: a notification created while the stream registers is delivered exactly once', async () => {
    const log = memoryLog();
    log.created(1);
    const { url } = await serve(log.repo, (hub) => {
      // Committed and published after the stream registered, before the hub reads the database.
      hub.onBusMessage(asBus(USER, log.created(2)));
    });
    client = await openStream(url, undefined);
    const connected = await client.waitFor((e) => e.event === 'connected');
    expect(connected.data).toMatchObject({ resumed: false, replayed: 0, resync: false });
    const created = await client.waitFor((e) => e.event === 'new_notification');
    expect(created.data.notification).toMatchObject({ title: 'n2' });
    expect(created.id).toBe('3');
    await client.waitFor((e) => e.event === 'unread_count_changed' && e.id === '4');
    expect(seqsOf(client, 'new_notification')).toEqual([3]);
  });

  it('a broadcast batch: both events of each user in order, bodies equal to the per-event serialisation', async () => {
    const log = memoryLog();
    log.created(1);
    const { url, hub } = await serve(log.repo);
    client = await openStream(url, undefined);
    await client.waitFor((e) => e.event === 'connected');
    // What a broadcast batch commits for this user: seqs 3 and 4, one bus message for many users.
    const template = {
      type: 'info' as const,
      title: 'Line\nbreak "quoted" ✓',
      content: 'c\r\nd',
      metadata: { a: [1, { b: '\u2028' }] },
      read: false,
    };
    const createdAt = new Date(Date.UTC(2030, 0, 2)).toISOString();
    const id = '00000000-0000-0000-0000-000000000099';
    hub().onBusMessage({
      kind: 'batch',
      template,
      items: [
        {
          userId: 'someone-else',
          id: '00000000-0000-0000-0000-000000000098',
          seq: 1,
          createdAt,
          unreadCount: 1,
        },
        { userId: USER, id, seq: 3, createdAt, unreadCount: 2 },
      ],
    });
    const count = await client.waitFor((e) => e.event === 'unread_count_changed' && e.id === '4');
    expect(count.data).toEqual({ type: 'unread_count_changed', unreadCount: 2 });
    const created = client.events.filter((e) => e.event === 'new_notification');
    expect(created.map((e) => e.id)).toEqual(['3']);
    expect(created[0]?.data).toEqual({
      type: 'new_notification',
      notification: { id, userId: USER, ...template, createdAt, updatedAt: createdAt },
    });
  });

  it('convergence asks for every open stream’s session in one batch and ends the dead ones', async () => {
    const log = memoryLog();
    const asked: Array<Array<{ userId: string; sessionId: string }>> = [];
    let live = true;
    const { url } = await serve(log.repo, () => {}, {
      keepAliveMs: 50,
      isSessionLive: async () => {
        throw new Error('convergence must use the batch check');
      },
      sessionsLive: async (sessions) => {
        asked.push(sessions.map((s) => ({ userId: s.userId, sessionId: s.sessionId })));
        return sessions.map(() => live);
      },
    });
    client = await openStream(url, undefined);
    const second = await openStream(url, undefined);
    try {
      await client.waitFor((e) => e.event === 'connected');
      await second.waitFor((e) => e.event === 'connected');
      await client.waitFor((e) => e.event === 'keep_alive');
      while (!asked.some((batch) => batch.length === 2)) await new Promise((r) => setTimeout(r, 20));
      expect(asked.find((batch) => batch.length === 2)).toEqual([
        { userId: USER, sessionId: 's1' },
        { userId: USER, sessionId: 's1' },
      ]);
      // The session ends without a bus message reaching this instance: the next check closes both streams.
      live = false;
      for (const c of [client, second]) {
        const err = await c.waitFor((e) => e.event === 'error');
        expect(err.data).toMatchObject({ code: 'SESSION_REVOKED' });
      }
    } finally {
      second.close();
    }
  });

  it('events published out of seq order are delivered in order, none dropped as a duplicate', async () => {
    const log = memoryLog();
    const { url, hub } = await serve(log.repo);
    client = await openStream(url, undefined);
    await client.waitFor((e) => e.event === 'connected');
    const batches = [1, 2, 3, 4, 5].map((n) => log.created(n));
    // Commit order 1..5, publish order 5, 3, 1, 4, 2 (as concurrent requests finish).
    for (const i of [4, 2, 0, 3, 1]) hub().onBusMessage(asBus(USER, batches[i] ?? []));
    await client.waitFor((e) => e.event === 'unread_count_changed' && e.id === '10');
    expect(seqsOf(client, 'new_notification')).toEqual([1, 3, 5, 7, 9]);
    expect(seqsOf(client, 'unread_count_changed')).toEqual([2, 4, 6, 8, 10]);
    expect(
      client.events.filter((e) => e.event === 'new_notification').map((e) => e.data.notification),
    ).toEqual([1, 2, 3, 4, 5].map((n) => notification(n)));
  });

  it('a lost bus message is repaired from the log when the next one arrives, or by a sync', async () => {
    const log = memoryLog();
    const { url, hub } = await serve(log.repo);
    client = await openStream(url, undefined);
    await client.waitFor((e) => e.event === 'connected');
    log.created(1); // never published
    hub().onBusMessage(asBus(USER, log.created(2)));
    await client.waitFor((e) => e.event === 'unread_count_changed' && e.id === '4');
    expect(seqsOf(client, 'new_notification')).toEqual([1, 3]);
    log.created(3); // never published either; a sync names it
    hub().onBusMessage({ kind: 'sync', users: [{ userId: USER, seq: 6 }] });
    await client.waitFor((e) => e.event === 'unread_count_changed' && e.id === '6');
    expect(seqsOf(client, 'new_notification')).toEqual([1, 3, 5]);
    log.created(4); // the periodic convergence check finds it with no message at all
    await hub().converge();
    await client.waitFor((e) => e.event === 'unread_count_changed' && e.id === '8');
    expect(seqsOf(client, 'new_notification')).toEqual([1, 3, 5, 7]);
  });

  it('resume replays every logged kind in order and says so; a cursor ahead of the server resyncs', async () => {
    const log = memoryLog();
    log.created(1);
    log.created(2);
    log.events.push(
      { seq: 5, name: 'notification_deleted', data: { notificationId: notification(1).id } },
      { seq: 6, name: 'unread_count_changed', data: { unreadCount: 1 } },
    );
    const { url } = await serve(log.repo);
    client = await openStream(url, undefined, { lastEventId: '2' });
    const connected = await client.waitFor((e) => e.event === 'connected');
    expect(connected.id).toBe('2');
    expect(connected.data).toMatchObject({ resumed: true, replayed: 4, resync: false });
    await client.waitFor((e) => e.id === '6');
    expect(client.events.slice(1).map((e) => [e.id, e.event])).toEqual([
      ['3', 'new_notification'],
      ['4', 'unread_count_changed'],
      ['5', 'notification_deleted'],
      ['6', 'unread_count_changed'],
    ]);
    client.close();
    for (const bad of ['999999999999999', 'not-a-number']) {
      client = await openStream(url, undefined, { lastEventId: bad });
      const c = await client.waitFor((e) => e.event === 'connected');
      expect(c.data).toMatchObject({ resumed: false, replayed: 0, resync: true });
      expect(c.id).toBe('6');
      client.close();
    }
  });
});

describe('newNotificationBodies', () => {
  it('writes exactly what eventBody writes for the same notification', () => {
    const templates = [
      { type: 'info' as const, title: 't', content: 'c', metadata: {}, read: false },
      {
        type: 'warning' as const,
        title: 'Line\nbreak "q" \\ ✓ 🎉',
        content: '<b>x</b>\r\n\u2028\u0000',
        metadata: { actionUrl: 'https://example.test/a?b=1', nested: { list: [1, 'two', null] } },
        read: false,
      },
    ];
    for (const template of templates) {
      const body = newNotificationBodies(template);
      const item = { id: 'id-"1"', userId: 'user\n2', createdAt: '2030-01-01T00:00:00.000Z' };
      const notification = {
        id: item.id,
        userId: item.userId,
        ...template,
        createdAt: item.createdAt,
        updatedAt: item.createdAt,
      };
      expect(body(item)).toBe(eventBody('new_notification', { notification }));
    }
  });
});
