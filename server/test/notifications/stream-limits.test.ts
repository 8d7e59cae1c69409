// Caps on notification streams: per user and per client IP on one instance, the rate of opens, and HEAD.
import { once } from 'node:events';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';
import { createVerifiedUser } from '../helpers/users.js';

describe('notification stream limits', () => {
  let env: TestEnv;
  const clients: SseClient[] = [];
  const open = async (base: string, cookie: string) => {
    const c = await openStream(base, cookie);
    clients.push(c);
    return c;
  };
  const errorOf = async (c: SseClient) => {
    await c.ended;
    return { status: c.status, retryAfter: c.headers['retry-after'], body: JSON.parse(c.raw()) };
  };

  beforeAll(async () => {
    env = await createTestEnv();
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await env.close();
  });

  it('refuses streams beyond the per-user cap with 429 TOO_MANY_STREAMS until one closes', async () => {
    const app = await env.app({ SSE_MAX_STREAMS_PER_USER: '2' });
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    const u = await createVerifiedUser(app, env.smtp);
    const [a, b] = [await open(base, u.cookie), await open(base, u.cookie)];
    await Promise.all([a, b].map((c) => c.waitFor((e) => e.event === 'connected')));
    const third = await errorOf(await open(base, u.cookie));
    expect(third.status).toBe(429);
    expect(third.body).toMatchObject({ code: 'TOO_MANY_STREAMS' });
    expect(Number(third.retryAfter)).toBeGreaterThan(0);
    expect(app.notificationStreams.stats().streams).toBe(2);
    // Another user is not affected by this user's cap.
    const other = await createVerifiedUser(app, env.smtp);
    await (await open(base, other.cookie)).waitFor((e) => e.event === 'connected');
    a.close();
    await a.ended;
    await expect.poll(() => app.notificationStreams.stats().streams).toBe(2);
    await (await open(base, u.cookie)).waitFor((e) => e.event === 'connected');
  });

  it('a stream request cut off by a malformed byte after it leaves nothing registered (no leaked slot, no presence)', async () => {
    const app = await env.app({ SSE_MAX_STREAMS_PER_USER: '2', SSE_OPEN_RATE_LIMIT: '1000' });
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = new URL(base);
    const u = await createVerifiedUser(app, env.smtp);
    // The request parses, its route starts authenticating, then the stray byte is a parse error: Node answers
    // 400 and destroys the socket while the route is still awaiting.
    for (let i = 0; i < 5; i++) {
      const socket = net.connect(Number(port), '127.0.0.1');
      socket.write(`GET /notification/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ${u.cookie}\r\n\r\nx`);
      socket.resume();
      await once(socket, 'close');
    }
    await expect.poll(() => app.notificationStreams.stats().streams).toBe(0);
    expect(app.notificationStreams.stats().users).toBe(0);
    // The user's two slots are free: two real streams open.
    const [a, b] = [await open(base, u.cookie), await open(base, u.cookie)];
    await Promise.all([a, b].map((c) => c.waitFor((e) => e.event === 'connected')));
    expect(app.notificationStreams.stats().streams).toBe(2);
  });

  it('refuses streams beyond the per-IP cap', async () => {
    const app = await env.app({ SSE_MAX_STREAMS_PER_IP: '2' });
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    const users = [await createVerifiedUser(app, env.smtp), await createVerifiedUser(app, env.smtp)];
    for (const u of users) await (await open(base, u.cookie)).waitFor((e) => e.event === 'connected');
    const third = await createVerifiedUser(app, env.smtp);
    const refused = await errorOf(await open(base, third.cookie));
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('TOO_MANY_STREAMS');
  });

  it('rate-limits stream opens with 429 RATE_LIMITED and Retry-After', async () => {
    const app = await env.app({ SSE_OPEN_RATE_LIMIT: '3', SSE_OPEN_RATE_WINDOW_MS: '60000' });
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    const u = await createVerifiedUser(app, env.smtp);
    for (let i = 0; i < 3; i++) {
      const c = await open(base, u.cookie);
      await c.waitFor((e) => e.event === 'connected');
      c.close();
      await c.ended;
    }
    const refused = await errorOf(await open(base, u.cookie));
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('RATE_LIMITED');
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
  });

  it('HEAD answers the stream headers without opening a stream', async () => {
    const app = await env.app();
    const u = await createVerifiedUser(app, env.smtp);
    const before = app.notificationStreams.stats();
    const res = await app.inject({
      method: 'HEAD',
      url: '/notification/stream',
      headers: { cookie: u.cookie },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/event-stream');
    expect(res.body).toBe('');
    expect(app.notificationStreams.stats()).toEqual(before);
    const anonymous = await app.inject({ method: 'HEAD', url: '/notification/stream' });
    expect(anonymous.statusCode).toBe(401);
  });
});
