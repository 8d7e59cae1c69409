// The SSE hub's connect sequence in isolation (stub repository, real HTTP response), for races the end-to-end
// tests cannot place deterministically.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyReply } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/guard.js';
import type { NotificationRepository, StoredNotification } from '../../src/notifications/repository.js';
import { createStreamHub, type StreamHub } from '../../src/notifications/stream.js';
import type { Presence } from '../../src/realtime/types.js';
import { openStream, type SseClient } from './sse-client.js';

const USER = 'user-1';

function row(seq: number): StoredNotification {
  const at = new Date(Date.UTC(2030, 0, 1, 0, 0, seq)).toISOString();
  return {
    id: `00000000-0000-0000-0000-${String(seq).padStart(12, '0')}`,
    userId: USER,
    type: 'info',
    title: `n${seq}`,
    content: 'c',
    metadata: {},
    read: false,
    createdAt: at,
    updatedAt: at,
    seq,
  };
}

describe('SSE hub connect sequence', () => {
  let server: http.Server | undefined;
  let client: SseClient | undefined;
  afterEach(async () => {
    client?.close();
    await new Promise((r) => server?.close(r));
  });

  /** Serves the hub on a loopback server; `onConnected` runs when the hub registers the stream. */
  async function serve(rows: StoredNotification[], onConnected: (hub: StreamHub) => void) {
    const repo = {
      maxSeq: async () => rows.reduce((m, r) => Math.max(m, r.seq), 0),
      after: async (_u: string, seq: number, limit: number) =>
        rows.filter((r) => r.seq > seq).slice(0, limit),
    } as unknown as NotificationRepository;
    let hub: StreamHub;
    const presence = {
      userConnected: () => {
        onConnected(hub);
        return () => {};
      },
    } as unknown as Presence;
    hub = createStreamHub({
      repo,
      presence,
      logger: pino({ level: 'silent' }),
      unreadCount: async () => rows.length,
      keepAliveMs: 60_000,
      maxBufferedBytes: 1 << 20,
    });
    const auth = {
      user: { id: USER },
      session: { id: 's1', expiresAt: new Date(Date.now() + 3_600_000) },
    } as unknown as AuthContext;
    server = http.createServer((_req, res) => {
      const reply = { hijack: () => {}, getHeaders: () => ({}), raw: res } as unknown as FastifyReply;
      void hub.open(reply, auth, null);
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('fresh connect: a notification created while the stream registers is delivered exactly once', async () => {
    const rows = [row(1), row(2)];
    const base = await serve(rows, (hub) => {
      // Committed and published after the stream registered, before the hub reads the database.
      const n = row(3);
      rows.push(n);
      const { seq, id, createdAt, userId, ...rest } = n;
      const { updatedAt: _u, ...template } = rest;
      hub.onBusMessage({
        kind: 'batch',
        template,
        items: [{ userId, id, seq, createdAt, unreadCount: 3 }],
      });
    });
    client = await openStream(base, undefined);
    const connected = await client.waitFor((e) => e.event === 'connected');
    expect(connected.id).toBe('2');
    const created = await client.waitFor((e) => e.event === 'new_notification');
    expect(created.data.notification).toMatchObject({ id: row(3).id, title: 'n3' });
    expect(created.id).toBe('3');
    await client.waitFor((e) => e.event === 'unread_count_changed');
    expect(client.events.filter((e) => e.event === 'new_notification')).toHaveLength(1);
    expect(client.events.every((e) => e.id !== undefined)).toBe(true);
  });
});
