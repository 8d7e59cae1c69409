// Issue 9 on Herald's own routes: non-JSON bodies answer 415, cookie-carrying cross-site writes answer 403,
// metadata nesting is bounded (and idempotency canonicalisation survives any depth), action URLs are stored
// normalised, chat pings spend the socket's frame budget, and admin broadcasts email only verified addresses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { requestHash } from '../../src/http/idempotency.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import {
  createAdmin,
  createVerifiedUser,
  jsonHeaders,
  type TestUser,
  uniqueEmail,
} from '../helpers/users.js';
import { type ChatClient, openChat } from '../helpers/ws-client.js';

const nested = (depth: number): Record<string, unknown> => {
  let value: Record<string, unknown> = { leaf: true };
  for (let i = 1; i < depth; i++) value = { n: value };
  return value;
};

describe("Herald's own routes: content type, origin, metadata, action URLs, broadcast emails", () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
    admin = await createAdmin(app, env.smtp);
    user = await createVerifiedUser(app, env.smtp);
  });
  afterAll(() => env.close());

  const send = (payload: unknown, headers: Record<string, string> = {}) =>
    app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: { ...jsonHeaders(admin.cookie), ...headers },
      payload: JSON.stringify(payload),
    });

  it.each([
    ['text/plain', '{"read":true}'],
    ['application/x-www-form-urlencoded', 'read=true'],
    ['multipart/form-data; boundary=x', '--x--'],
  ])('answers 415 UNSUPPORTED_MEDIA_TYPE to a %s body', async (type, payload) => {
    const res = await app.inject({
      method: 'PATCH',
      url: '/notification/preferences',
      headers: { 'content-type': type, cookie: user.cookie },
      payload,
    });
    expect(res.statusCode, res.body).toBe(415);
    expect(res.json()).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
  });

  it('refuses a cookie-carrying write from a foreign Origin or a cross-site fetch (403 FORBIDDEN)', async () => {
    const heartbeat = (headers: Record<string, string>) =>
      app.inject({ method: 'POST', url: '/notification/heartbeat', headers });
    const foreign = await heartbeat({ cookie: user.cookie, origin: 'https://evil.example' });
    expect(foreign.statusCode).toBe(403);
    expect(foreign.json()).toMatchObject({ code: 'FORBIDDEN' });
    const opaque = await heartbeat({ cookie: user.cookie, origin: 'null' });
    expect(opaque.statusCode).toBe(403);
    const crossSite = await heartbeat({ cookie: user.cookie, 'sec-fetch-site': 'cross-site' });
    expect(crossSite.statusCode).toBe(403);
    // Allowed: the front end, a same-origin fetch, and clients that send neither header (curl, servers).
    expect((await heartbeat({ cookie: user.cookie, origin: 'http://localhost:3000' })).statusCode).toBe(200);
    expect((await heartbeat({ cookie: user.cookie, 'sec-fetch-site': 'same-origin' })).statusCode).toBe(200);
    expect((await heartbeat({ cookie: user.cookie })).statusCode).toBe(200);
    // Reads are not affected.
    const read = await app.inject({
      url: '/notification/unread-count',
      headers: { cookie: user.cookie, origin: 'https://evil.example' },
    });
    expect(read.statusCode).toBe(200);
  });

  it('refuses metadata nested deeper than 10 levels (400), also with an Idempotency-Key at 2,500 levels', async () => {
    const notification = (data: Record<string, unknown>) => ({
      target: { scope: 'user', identifier: user.id },
      notification: { type: 'info', title: 'Deep', content: 'Deep', metadata: { data } },
    });
    const deep = await send(notification(nested(2_500)), { 'idempotency-key': 'deep-1' });
    expect(deep.statusCode, deep.body).toBe(400);
    // Past 64 levels the body is refused at parse (http/nul-guard.ts), before validation.
    expect(deep.json()).toMatchObject({ code: 'INVALID_JSON' });
    // metadata is level 1 and its `data` object level 2, so nested(10) reaches level 11.
    const eleven = await send(notification(nested(10)));
    expect(eleven.statusCode).toBe(400);
    const ten = await send(notification(nested(9)), { 'idempotency-key': 'ten-1' });
    expect(ten.statusCode, ten.body).toBe(200);
  });

  it('canonicalises request bodies of any depth without recursion, independent of key order', () => {
    expect(() => requestHash(nested(100_000))).not.toThrow();
    expect(requestHash({ a: 1, b: [1, { d: 2, c: 3 }] })).toBe(requestHash({ b: [1, { c: 3, d: 2 }], a: 1 }));
    expect(requestHash({ a: [1, 2] })).not.toBe(requestHash({ a: [2, 1] }));
  });

  it('stores absolute action URLs normalised', async () => {
    const res = await send({
      target: { scope: 'user', identifier: user.id },
      notification: {
        type: 'info',
        title: 'Normalised',
        content: 'Normalised',
        metadata: {
          actions: [
            { actionId: 'a', type: 'link', label: 'A', url: 'HTTP://LocalHost:3000/x/../y?q=1' },
            { actionId: 'b', type: 'link', label: 'B', url: '/relative/path' },
          ],
        },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const list = await app.inject({
      url: '/notification/list?search=Normalised',
      headers: { cookie: user.cookie },
    });
    const [n] = (list.json() as { notifications: Array<{ metadata: { actions: Array<{ url: string }> } }> })
      .notifications;
    expect(n?.metadata.actions.map((a) => a.url)).toEqual(['http://localhost:3000/y?q=1', '/relative/path']);
  });

  it('emails a broadcast only to verified addresses; unverified users still get the notification', async () => {
    const unverifiedEmail = uniqueEmail('unverified');
    const signUp = await app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      headers: jsonHeaders(),
      payload: { email: unverifiedEmail, password: 'correct horse battery', name: 'Pending' },
    });
    expect(signUp.statusCode).toBe(200);
    const unverifiedId = (signUp.json() as { user: { id: string } }).user.id;
    const verified = await createVerifiedUser(app, env.smtp);
    const res = await send({
      target: { scope: 'users', identifiers: [unverifiedId, verified.id] },
      notification: {
        type: 'announcement',
        title: 'Broadcast to both',
        content: 'Body',
        deliveryOptions: { strategies: ['email'] },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ targetCount: 2, createdCount: 2 });
    // The verified user's email is the barrier: both were queued in the same batch.
    await env.smtp.waitFor((m) => m.to.includes(verified.email) && m.subject.includes('Broadcast to both'));
    await new Promise((r) => setTimeout(r, 300));
    expect(
      env.smtp.messages.some((m) => m.to.includes(unverifiedEmail) && m.subject.includes('Broadcast')),
    ).toBe(false);
  });
});

describe('chat frame budget', () => {
  let env: TestEnv;
  let app: App;
  let chat: ChatClient | undefined;
  beforeAll(async () => {
    env = await createTestEnv({ CHAT_FRAME_LIMIT: '50' });
    app = await env.app();
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await chat?.close();
    await env.close();
  });

  it('throttles pings with the other frames: 5,000 pings never get 5,000 pongs', async () => {
    chat = await openChat(app);
    for (let i = 0; i < 5_000; i++) chat.send({ type: 'ping' });
    const closed = await Promise.race([
      chat.closed,
      new Promise<null>((r) => setTimeout(() => r(null), 5_000)),
    ]);
    const pongs = chat.log.filter((e) => e.type === 'pong').length;
    expect(pongs).toBeLessThanOrEqual(50);
    expect(chat.log.some((e) => e.type === 'throttled' && e.limit === 50)).toBe(true);
    // The flood continues past the throttled replies, so the socket is closed for abuse.
    expect(closed?.code).toBe(4029);
  });
});
