// The chat service with in-memory stand-ins for the hub, repository and bus: rules that depend on an exact
// interleaving (a socket closed while its requests are still queued) that real sockets cannot pin down.
import { Buffer } from 'node:buffer';
import type { Duplex } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import type { ChatConnection, ChatHub } from '../../src/chat/hub.js';
import type { ChatMessage } from '../../src/chat/protocol.js';
import type { ChatRepository, NewChatMessage } from '../../src/chat/repository.js';
import { createChatService, createHistoryCache } from '../../src/chat/service.js';
import { createTypingThrottle, type MessageThrottle } from '../../src/chat/throttle.js';
import type { Logger } from '../../src/infra/logger.js';
import type { Bus } from '../../src/realtime/bus.js';

const OPEN = 1;
const CLOSING = 2;

function setup() {
  const ws = { readyState: OPEN, OPEN, CLOSING };
  const conn = {
    id: 'c1',
    ws: ws as unknown as WebSocket,
    socket: {} as Duplex,
    role: 'member',
    identity: {
      userId: 'u1',
      name: 'Ada',
      image: null,
      emailVerified: true,
      isAdmin: false,
      sessionId: 's1',
      sessionExpiresAt: Date.now() + 3_600_000,
    },
    ip: '127.0.0.1',
    alive: true,
    queue: null,
    corked: false,
  } satisfies ChatConnection;
  const inserted: NewChatMessage[] = [];
  const gates: Array<() => void> = [];
  const repo = {
    insert(input: NewChatMessage) {
      inserted.push(input);
      return new Promise<{ message: ChatMessage; created: boolean }>((resolve) => {
        // Only the first insert waits (for the test to release it); later ones complete at once.
        const gate = (fn: () => void) => (inserted.length === 1 ? gates.push(fn) : fn());
        gate(() =>
          resolve({
            created: true,
            message: {
              id: String(inserted.length),
              userId: input.userId,
              userName: input.userName,
              userAvatar: null,
              message: input.message,
              createdAt: new Date().toISOString(),
            },
          }),
        );
      });
    },
  } as unknown as ChatRepository;
  const published: unknown[] = [];
  const bus = {
    publish: async (_topic: string, payload: unknown) => {
      published.push(payload);
    },
  } as unknown as Bus;
  const sent: unknown[] = [];
  const hub = {
    send: (_c: ChatConnection, data: Buffer) => sent.push(JSON.parse(data.toString())),
    close: () => {},
  } as unknown as ChatHub;
  const throttle: MessageThrottle = {
    limit: 5,
    windowMs: 10_000,
    hit: async () => ({ ok: true }),
    close() {},
  };
  const logger: Logger = pino({ level: 'silent' });
  const service = createChatService({
    hub,
    repo,
    bus,
    throttle,
    typing: createTypingThrottle(),
    logger,
    // Revocation re-checks are covered by the real-process tests (test/chat/revocation.test.ts).
    sessionLive: async () => true,
    frameLimit: 200,
    history: createHistoryCache(repo, 0),
  });
  const frame = (f: unknown) => service.onFrame(conn, Buffer.from(JSON.stringify(f)), false);
  service.open(conn);
  return { ws, conn, inserted, gates, published, sent, frame, service };
}

describe('chat service', () => {
  it('stores nothing queued on a socket once its close has begun (ban, sign-out, abuse)', async () => {
    const t = setup();
    t.frame({ type: 'send_message', message: 'first', clientMessageId: 'a' });
    t.frame({ type: 'send_message', message: 'queued 1', clientMessageId: 'b' });
    t.frame({ type: 'send_message', message: 'queued 2', clientMessageId: 'c' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(t.inserted.map((m) => m.message)).toEqual(['first']);
    // The user is banned while the first insert is in flight: the hub starts closing the socket.
    t.ws.readyState = CLOSING;
    t.gates.shift()?.();
    await t.service.idle(t.conn);
    expect(t.inserted.map((m) => m.message)).toEqual(['first']);
    expect(t.published).toHaveLength(1);
    t.frame({ type: 'typing', isTyping: true });
    expect(t.published).toHaveLength(1);
  });
});
