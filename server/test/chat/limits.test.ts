// Chat limits and liveness over real sockets: the cross-connection message throttle, connection limits before
// the upgrade, the server ping loop (healthy peers stay, dead ones go), slow consumers and shutdown (1001).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { type ChatClient, openChat, refusedStatus } from '../helpers/ws-client.js';

describe('chat limits and liveness', () => {
  let env: TestEnv;
  const clients: ChatClient[] = [];
  const listen = async (extra: Record<string, string>) => {
    const app = await env.app(extra);
    await app.listen({ port: 0, host: '127.0.0.1' });
    return app;
  };
  const open = async (app: App, cookie?: string, options: Parameters<typeof openChat>[1] = {}) => {
    const c = await openChat(app, { cookie, ...options });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    env = await createTestEnv();
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await env.close();
  });

  describe('throttle (contract default 5 messages / 10 s per user)', () => {
    let app: App;
    let user: TestUser;
    beforeAll(async () => {
      app = await listen({});
      user = await createVerifiedUser(app, env.smtp, { name: 'Chatty' });
    });

    it('throttles the sixth message across connections; a new connection does not reset it', async () => {
      const a = await open(app, user.cookie);
      const b = await open(app, user.cookie);
      for (let i = 0; i < 5; i++) {
        const c = i % 2 === 0 ? a : b;
        const clientMessageId = randomUUID();
        c.send({ type: 'send_message', message: `m${i}`, clientMessageId });
        await c.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
      }
      a.send({ type: 'send_message', message: 'one too many' });
      const throttled = await a.next('throttled');
      expect(throttled).toMatchObject({ type: 'throttled', limit: 5, windowMs: 10_000 });
      expect(throttled.retryAfterMs).toBeGreaterThan(0);
      expect(throttled.retryAfterMs).toBeLessThanOrEqual(10_000);

      const fresh = await open(app, user.cookie);
      fresh.send({ type: 'send_message', message: 'new socket, same user' });
      expect((await fresh.next('throttled')).limit).toBe(5);
      // Another user is not affected.
      const other = await createVerifiedUser(app, env.smtp);
      const o = await open(app, other.cookie);
      o.send({ type: 'send_message', message: 'fine', clientMessageId: 'x1' });
      await o.next('new_message', (e) => e.message.clientMessageId === 'x1');
    });

    it('counts in the shared store, so another instance sees the same budget', async () => {
      const second = await listen({});
      const u = await createVerifiedUser(app, env.smtp);
      const onA = await open(app, u.cookie);
      const onB = await open(second, u.cookie);
      for (let i = 0; i < 5; i++) {
        const c = i < 3 ? onA : onB;
        const clientMessageId = randomUUID();
        c.send({ type: 'send_message', message: `m${i}`, clientMessageId });
        await c.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
      }
      onB.send({ type: 'send_message', message: 'sixth' });
      await onB.next('throttled');
      onA.send({ type: 'send_message', message: 'seventh' });
      await onA.next('throttled');
    });

    it('lets the user send again once retryAfterMs has passed', async () => {
      const quick = await listen({ CHAT_THROTTLE_LIMIT: '2', CHAT_THROTTLE_WINDOW_MS: '300' });
      const u = await createVerifiedUser(quick, env.smtp);
      const c = await open(quick, u.cookie);
      for (const id of ['a', 'b']) {
        c.send({ type: 'send_message', message: id, clientMessageId: id });
        await c.next('new_message', (e) => e.message.clientMessageId === id);
      }
      c.send({ type: 'send_message', message: 'c', clientMessageId: 'c' });
      const t = await c.next('throttled');
      expect(t).toMatchObject({ limit: 2, windowMs: 300 });
      await new Promise((resolve) => setTimeout(resolve, t.retryAfterMs + 20));
      c.send({ type: 'send_message', message: 'c', clientMessageId: 'c' });
      await c.next('new_message', (e) => e.message.clientMessageId === 'c');
    });
  });

  describe('throttle while the store is down', () => {
    it('falls back to a per-instance limit and keeps chat working', async () => {
      const redis = await startRedisServer();
      try {
        const app = await listen({ CACHE_URL: redis.url, CHAT_THROTTLE_LIMIT: '2' });
        const u = await createVerifiedUser(app, env.smtp);
        const sender = await open(app, u.cookie);
        const reader = await open(app);
        await redis.stop();
        // Wait for the bus to notice the outage (degraded mode); the throttle then counts locally.
        const deadline = Date.now() + 15_000;
        while (!app.ctx.realtime.bus.isDegraded() && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        expect(app.ctx.realtime.bus.isDegraded()).toBe(true);
        for (const id of ['d1', 'd2']) {
          sender.send({ type: 'send_message', message: id, clientMessageId: id });
          await reader.next('new_message', (e) => e.message.clientMessageId === id);
        }
        sender.send({ type: 'send_message', message: 'd3', clientMessageId: 'd3' });
        expect(await sender.next('throttled')).toMatchObject({ limit: 2 });
      } finally {
        await redis.close();
      }
    });
  });

  describe('connection limits (HTTP 429 before the upgrade)', () => {
    it('limits connections per user and per address', async () => {
      const app = await listen({ CHAT_MAX_CONNECTIONS_PER_USER: '2', CHAT_MAX_CONNECTIONS_PER_IP: '4' });
      const u = await createVerifiedUser(app, env.smtp);
      const first = await open(app, u.cookie);
      await open(app, u.cookie);
      const refusedUser = await refusedStatus(app, { cookie: u.cookie });
      expect(refusedUser.status).toBe(429);
      expect(JSON.parse(refusedUser.body).code).toBe('RATE_LIMITED');

      await open(app);
      await open(app);
      const refusedIp = await refusedStatus(app);
      expect(refusedIp.status).toBe(429);

      // A closed socket frees its slot.
      await first.close();
      const again = await open(app);
      expect(again.log[0]?.role).toBe('guest');
    });
  });

  describe('ping loop', () => {
    it('keeps a healthy socket open across many ping intervals and terminates a dead peer', async () => {
      // 250 ms leaves a loaded CI machine time to answer; the reference dropped sockets after about one interval.
      const app = await listen({ WS_PING_INTERVAL_MS: '250' });
      const healthy = await open(app);
      const dead = await open(app, undefined, { wsOptions: { autoPong: false } });
      let pings = 0;
      const sixPings = new Promise<void>((resolve) =>
        healthy.ws.on('ping', () => {
          pings++;
          if (pings === 6) resolve();
        }),
      );
      const deadClosed = await dead.closed;
      expect(deadClosed.code).toBe(1006);
      await sixPings;
      expect(healthy.ws.readyState).toBe(healthy.ws.OPEN);
      healthy.send({ type: 'ping' });
      await healthy.next('pong');
    });
  });

  describe('slow consumers', () => {
    it('closes a socket that stops reading instead of buffering without bound', async () => {
      const app = await listen({
        CHAT_THROTTLE_LIMIT: '100000',
        CHAT_FRAME_LIMIT: '100000',
        CHAT_SEND_BUFFER_LIMIT_BYTES: '16384',
      });
      // The longest name and avatar URL allowed make every broadcast ~2.5 KiB, so the kernel buffers fill
      // after a few thousand.
      const loud = await createVerifiedUser(app, env.smtp, { name: 'N'.repeat(64) });
      const avatar = await app.inject({
        method: 'POST',
        url: '/auth/update-user',
        headers: jsonHeaders(loud.cookie),
        payload: { image: `https://img.example/${'i'.repeat(2_000)}` },
      });
      expect(avatar.statusCode, avatar.body).toBe(200);
      // Several sockets of one user: requests of one socket are processed in order, sockets in parallel.
      const senders = await Promise.all([1, 2, 3, 4].map(() => open(app, loud.cookie)));
      const slow = await open(app);
      slow.ws.pause();
      const text = 'y'.repeat(400);
      // The paused client cannot see its own close; the server's connection count tells.
      const closed = () => app.ctx.realtime.presence.localChatConnections() < senders.length + 1;
      let sent = 0;
      // Broadcast until the server gives up on the paused reader (kernel buffers fill first).
      while (!closed() && sent < 40_000) {
        await Promise.all(
          senders.map((sender) => {
            let last = '';
            // Batches below the per-socket in-flight limit; awaiting the last one paces the sender.
            for (let i = 0; i < 10; i++) {
              last = `s${sent++}`;
              sender.send({ type: 'send_message', message: text, clientMessageId: last });
            }
            return sender.next('new_message', (e) => e.message.clientMessageId === last);
          }),
        );
      }
      expect(closed()).toBe(true);
      slow.ws.resume();
      expect((await slow.closed).code).not.toBe(1000);
    });
  });

  describe('shutdown', () => {
    it('closes sockets with 1001', async () => {
      const app = await listen({});
      const c = await open(app);
      const closing = app.close();
      expect((await c.closed).code).toBe(1001);
      await closing;
    });

    it('refuses upgrades with 503 once shutdown has begun', async () => {
      const app = await listen({});
      app.ctx.lifecycle.beginShutdown();
      const refused = await refusedStatus(app);
      expect(refused.status).toBe(503);
      expect(JSON.parse(refused.body).code).toBe('UNAVAILABLE');
    });
  });
});
