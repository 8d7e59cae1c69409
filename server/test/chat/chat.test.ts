// Chat over real WebSockets against a real listening server (one instance): handshake rules, protocol
// validation, message rules, permissions, idempotency, purge, ping/pong and user disconnections.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { chatMessage } from '../../src/infra/schema/chat.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { type ChatClient, openChat, refusedStatus } from '../helpers/ws-client.js';

describe('chat (single instance)', () => {
  let env: TestEnv;
  let app: App;
  let alice: TestUser;
  let bob: TestUser;
  let admin: TestUser;
  const clients: ChatClient[] = [];
  const open = async (cookie?: string) => {
    const c = await openChat(app, { cookie });
    clients.push(c);
    return c;
  };
  /** Sends a message and waits for its broadcast on the sender's socket. */
  const say = async (c: ChatClient, message: string, extra: Record<string, unknown> = {}) => {
    const clientMessageId = (extra.clientMessageId as string | undefined) ?? randomUUID();
    c.send({ type: 'send_message', message, ...extra, clientMessageId });
    return c.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
  };

  beforeAll(async () => {
    // A generous throttle here; the throttle has its own describe block with the contract's limit.
    env = await createTestEnv({
      CHAT_THROTTLE_LIMIT: '1000',
      PRESENCE_DEBOUNCE_MS: '20',
      CHAT_MAX_CONNECTIONS_PER_USER: '1000',
      CHAT_MAX_CONNECTIONS_PER_IP: '1000',
    });
    app = await env.app();
    await app.listen({ port: 0, host: '127.0.0.1' });
    [alice, bob, admin] = await Promise.all([
      createVerifiedUser(app, env.smtp, { name: 'Alice' }),
      createVerifiedUser(app, env.smtp, { name: 'Bob' }),
      createAdmin(app, env.smtp),
    ]);
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await env.close();
  });

  describe('handshake', () => {
    it('refuses a foreign Origin with 403 before the upgrade', async () => {
      const refused = await refusedStatus(app, { origin: 'https://evil.example', cookie: alice.cookie });
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'FORBIDDEN' });
    });

    it('refuses a missing Origin with 403', async () => {
      const refused = await refusedStatus(app, { origin: null });
      expect(refused.status).toBe(403);
    });

    it.each([
      'null',
      'HTTP://LOCALHOST:3000',
      'http://localhost:3000/',
      'http://localhost:3000.evil.example',
      'http://localhost:3000@evil.example',
      'http://evil.example#http://localhost:3000',
      'http://localhost:3002',
      'https://localhost:3000',
    ])('refuses the look-alike Origin %s with 403', async (origin) => {
      const refused = await refusedStatus(app, { origin, cookie: alice.cookie });
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'FORBIDDEN' });
    });

    it.each([
      ['/health', 'websocket'],
      ['/chat/', 'websocket'],
      ['/notification/list', 'foo'],
    ])(
      'answers an upgrade of %s (Upgrade: %s) with 404 and closes it, never leaving it hanging',
      async (path, kind) => {
        const { port } = app.server.address() as AddressInfo;
        const socket = net.connect(port, '127.0.0.1');
        socket.write(
          `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: ${kind}\r\n` +
            `Origin: ${TEST_ORIGIN}\r\n\r\n`,
        );
        let answer = '';
        socket.on('data', (chunk: Buffer) => {
          answer += chunk.toString('latin1');
        });
        await once(socket, 'close');
        expect(answer).toMatch(/^HTTP\/1\.1 404 /);
        expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 'NOT_FOUND' });
      },
    );

    it('answers a plain GET /chat with 426', async () => {
      const res = await app.inject({ method: 'GET', url: '/chat' });
      expect(res.statusCode).toBe(426);
      expect(res.json()).toMatchObject({ code: 'UPGRADE_REQUIRED' });
    });

    it('documents the chat routes in the OpenAPI document', async () => {
      const res = await app.inject({ method: 'GET', url: '/openapi.json' });
      expect(res.statusCode).toBe(200);
      const paths = res.json().paths as Record<string, unknown>;
      expect(Object.keys(paths)).toEqual(
        expect.arrayContaining(['/chat', '/chat/history', '/admin/users/{id}/messages']),
      );
    });

    it('greets a guest with connected then message_history', async () => {
      const guest = await open();
      expect(guest.log[0]).toMatchObject({
        type: 'connected',
        userId: null,
        role: 'guest',
        instanceId: app.ctx.config.INSTANCE_ID,
      });
      expect(typeof guest.log[0]?.connectionId).toBe('string');
      expect(guest.log[1]?.type).toBe('message_history');
      expect(Array.isArray(guest.log[1]?.messages)).toBe(true);
    });

    it('identifies members and admins from the session cookie, each connection with its own id', async () => {
      const a1 = await open(alice.cookie);
      const a2 = await open(alice.cookie);
      const ad = await open(admin.cookie);
      expect(a1.log[0]).toMatchObject({ type: 'connected', userId: alice.id, role: 'member' });
      expect(ad.log[0]).toMatchObject({ type: 'connected', userId: admin.id, role: 'admin' });
      expect(a1.log[0]?.connectionId).not.toBe(a2.log[0]?.connectionId);
    });

    it('treats an invalid session cookie as a guest', async () => {
      const c = await open('better-auth.session_token=forged.value');
      expect(c.log[0]).toMatchObject({ role: 'guest', userId: null });
    });
  });

  describe('protocol', () => {
    it('answers ping with pong and a timestamp', async () => {
      const c = await open();
      c.send({ type: 'ping' });
      const pong = await c.next('pong');
      expect(Number.isNaN(Date.parse(pong.timestamp))).toBe(false);
    });

    it.each([
      ['not json', 'INVALID_JSON'],
      ['[1,2]', 'VALIDATION_ERROR'],
      ['"text"', 'VALIDATION_ERROR'],
      ['{}', 'VALIDATION_ERROR'],
      ['{"type":42}', 'VALIDATION_ERROR'],
      ['{"type":"shout"}', 'UNKNOWN_TYPE'],
      ['{"type":"__proto__"}', 'UNKNOWN_TYPE'],
      ['{"type":"send_message"}', 'VALIDATION_ERROR'],
      ['{"type":"send_message","message":42}', 'VALIDATION_ERROR'],
      ['{"type":"send_message","message":"hi","extra":true}', 'VALIDATION_ERROR'],
      ['{"type":"send_message","message":"hi","clientMessageId":""}', 'VALIDATION_ERROR'],
      [`{"type":"send_message","message":"hi","clientMessageId":"${'x'.repeat(101)}"}`, 'VALIDATION_ERROR'],
      ['{"type":"send_message","message":"hi","clientMessageId":"a\\u0000b"}', 'VALIDATION_ERROR'],
      ['{"type":"send_message","message":"a\\u0000b"}', 'VALIDATION_ERROR'],
      ['{"type":"edit_message","messageId":"nope","message":"x"}', 'VALIDATION_ERROR'],
      ['{"type":"delete_message"}', 'VALIDATION_ERROR'],
      ['{"type":"typing","isTyping":"yes"}', 'VALIDATION_ERROR'],
      ['{"type":"ping","x":1}', 'VALIDATION_ERROR'],
    ])('rejects %s with %s and keeps the socket open', async (frame, code) => {
      const c = await open(alice.cookie);
      c.sendRaw(frame);
      const error = await c.next('error');
      expect(error.code).toBe(code);
      expect(typeof error.message).toBe('string');
      c.send({ type: 'ping' });
      await c.next('pong');
      expect(c.ws.readyState).toBe(c.ws.OPEN);
    });

    it('rejects binary frames with an error', async () => {
      const c = await open(alice.cookie);
      c.sendRaw(Buffer.from('{"type":"ping"}'), true);
      expect((await c.next('error')).code).toBe('BINARY_NOT_SUPPORTED');
      c.send({ type: 'ping' });
      await c.next('pong');
    });

    it('closes with 1009 on a frame over 16 KiB', async () => {
      const c = await open(alice.cookie);
      c.send({ type: 'send_message', message: 'x'.repeat(17 * 1024) });
      expect((await c.closed).code).toBe(1009);
    });

    it('accepts a frame just under 16 KiB (then rejects the long message by its own rule)', async () => {
      const c = await open(alice.cookie);
      c.send({ type: 'send_message', message: 'x'.repeat(16 * 1024 - 100) });
      expect((await c.next('error')).code).toBe('MESSAGE_TOO_LONG');
    });

    it('bounds the requests of one socket waiting for the database', async () => {
      const c = await open(alice.cookie);
      const ids = Array.from({ length: 20 }, (_, i) => `burst-${i}-${randomUUID()}`);
      for (const clientMessageId of ids) c.send({ type: 'send_message', message: 'burst', clientMessageId });
      expect((await c.next('error')).code).toBe('TOO_MANY_REQUESTS');
      // The first 16 are accepted and stored in order; the socket stays usable.
      await c.next('new_message', (e) => e.message.clientMessageId === ids[15]);
      const stored = c.log.filter((e) => e.type === 'new_message' && ids.includes(e.message.clientMessageId));
      expect(stored.map((e) => e.message.clientMessageId)).toEqual(ids.slice(0, 16));
      expect(c.log.filter((e) => e.type === 'error' && e.code === 'TOO_MANY_REQUESTS')).toHaveLength(4);
      c.send({ type: 'ping' });
      await c.next('pong');
    });

    it('closes a socket flooding invalid frames with 4029', async () => {
      const c = await open();
      for (let i = 0; i < 25; i++) c.sendRaw('garbage');
      expect((await c.closed).code).toBe(4029);
    });
  });

  describe('messages', () => {
    it('keeps guests read-only', async () => {
      const guest = await open();
      for (const frame of [
        { type: 'send_message', message: 'hi' },
        { type: 'edit_message', messageId: randomUUID(), message: 'x' },
        { type: 'delete_message', messageId: randomUUID() },
        { type: 'typing', isTyping: true },
      ]) {
        guest.send(frame);
        expect((await guest.next('error')).code).toBe('UNAUTHORIZED');
      }
    });

    it('stores a member message and broadcasts it to every local socket', async () => {
      const sender = await open(alice.cookie);
      const other = await open(bob.cookie);
      const guest = await open();
      const clientMessageId = randomUUID();
      sender.send({ type: 'send_message', message: '  hello world  ', clientMessageId });
      const events = await Promise.all(
        [sender, other, guest].map((c) =>
          c.next('new_message', (e) => e.message.clientMessageId === clientMessageId),
        ),
      );
      const message = events[0]?.message;
      expect(message).toMatchObject({
        userId: alice.id,
        userName: 'Alice',
        userAvatar: null,
        message: 'hello world',
        clientMessageId,
      });
      expect(message.editedAt).toBeUndefined();
      // Exactly the contract's ChatMessage fields, nothing internal (seq) leaks.
      expect(Object.keys(message).sort()).toEqual(
        ['clientMessageId', 'createdAt', 'id', 'message', 'userAvatar', 'userId', 'userName'].sort(),
      );
      expect(Date.parse(message.createdAt)).not.toBeNaN();
      for (const e of events) expect(e.message).toEqual(message);
      const rows = await app.ctx.database.db.select().from(chatMessage).where(eq(chatMessage.id, message.id));
      expect(rows).toHaveLength(1);
    });

    it('enforces 1–400 characters after trimming, counting code points', async () => {
      const c = await open(alice.cookie);
      c.send({ type: 'send_message', message: '   \t ' });
      expect((await c.next('error')).code).toBe('MESSAGE_EMPTY');
      c.send({ type: 'send_message', message: '' });
      expect((await c.next('error')).code).toBe('MESSAGE_EMPTY');
      c.send({ type: 'send_message', message: 'a'.repeat(401) });
      expect((await c.next('error')).code).toBe('MESSAGE_TOO_LONG');
      expect((await say(c, 'a'.repeat(400))).message.message).toHaveLength(400);
      // 400 emoji are 800 UTF-16 units but 400 characters.
      expect((await say(c, '😀'.repeat(400))).message.message).toBe('😀'.repeat(400));
      expect((await say(c, ` ${'b'.repeat(400)} `)).message.message).toBe('b'.repeat(400));
    });

    it('allows line breaks for admins only', async () => {
      const member = await open(alice.cookie);
      for (const text of ['line one\nline two', 'a\r\nb', 'a\rb', 'a\u2028b', 'a\u2029b', 'a\u0085b']) {
        member.send({ type: 'send_message', message: text });
        expect((await member.next('error')).code).toBe('MESSAGE_MULTILINE');
      }
      const ad = await open(admin.cookie);
      expect((await say(ad, 'line one\nline two\n')).message.message).toBe('line one\nline two');
    });

    it('rejects a NUL character in an edit as invalid input, not as a database failure', async () => {
      const c = await open(alice.cookie);
      const original = (await say(c, 'to be edited')).message;
      c.send({ type: 'edit_message', messageId: original.id, message: 'a\u0000b' });
      expect((await c.next('error')).code).toBe('VALIDATION_ERROR');
    });

    it('keeps a member whose email is no longer verified from writing or typing', async () => {
      const u = await createVerifiedUser(app, env.smtp, { name: 'Unverified' });
      const before = await open(u.cookie);
      const own = (await say(before, 'while verified')).message;
      // The admin plugin's update-user refreshes the stored session records, as a real un-verification would.
      const res = await app.inject({
        method: 'POST',
        url: '/auth/admin/update-user',
        headers: jsonHeaders(admin.cookie),
        payload: { userId: u.id, data: { emailVerified: false } },
      });
      expect(res.statusCode).toBe(200);
      const c = await open(u.cookie);
      expect(c.log[0]).toMatchObject({ type: 'connected', userId: u.id, role: 'member' });
      const watcher = await open(bob.cookie);
      for (const frame of [
        { type: 'send_message', message: 'let me in', clientMessageId: 'unverified-1' },
        { type: 'edit_message', messageId: own.id, message: 'changed' },
        { type: 'delete_message', messageId: own.id },
        { type: 'typing', isTyping: true },
      ]) {
        c.send(frame);
        expect((await c.next('error')).code).toBe('EMAIL_NOT_VERIFIED');
      }
      // A later message is a barrier: nothing from the unverified socket reached the watcher.
      await say(watcher, 'marker after unverified');
      expect(watcher.log.some((e) => e.type === 'typing' && e.userId === u.id)).toBe(false);
      const rows = await app.ctx.database.db.select().from(chatMessage).where(eq(chatMessage.userId, u.id));
      expect(rows.map((r) => r.message)).toEqual(['while verified']);
    });

    it('lets the owner edit and delete, others get FORBIDDEN, admins may moderate', async () => {
      const a = await open(alice.cookie);
      const b = await open(bob.cookie);
      const ad = await open(admin.cookie);
      const original = (await say(a, 'first version')).message;

      b.send({ type: 'edit_message', messageId: original.id, message: 'hijacked' });
      expect((await b.next('error')).code).toBe('FORBIDDEN');
      b.send({ type: 'delete_message', messageId: original.id });
      expect((await b.next('error')).code).toBe('FORBIDDEN');

      a.send({ type: 'edit_message', messageId: original.id, message: ' second version ' });
      const updated = await b.next('message_updated', (e) => e.message.id === original.id);
      expect(updated.message).toMatchObject({ id: original.id, message: 'second version', userId: alice.id });
      expect(Date.parse(updated.message.editedAt)).toBeGreaterThanOrEqual(Date.parse(original.createdAt));
      expect(updated.message.createdAt).toBe(original.createdAt);

      a.send({ type: 'edit_message', messageId: original.id, message: 'two\nlines' });
      expect((await a.next('error')).code).toBe('MESSAGE_MULTILINE');

      ad.send({ type: 'edit_message', messageId: original.id, message: 'moderated' });
      await a.next('message_updated', (e) => e.message.message === 'moderated');

      const second = (await say(b, 'bob says')).message;
      ad.send({ type: 'delete_message', messageId: second.id });
      expect((await a.next('message_deleted', (e) => e.messageId === second.id)).messageId).toBe(second.id);

      a.send({ type: 'delete_message', messageId: original.id });
      await b.next('message_deleted', (e) => e.messageId === original.id);
      a.send({ type: 'delete_message', messageId: original.id });
      expect((await a.next('error')).code).toBe('MESSAGE_NOT_FOUND');
      a.send({ type: 'edit_message', messageId: randomUUID(), message: 'x' });
      expect((await a.next('error')).code).toBe('MESSAGE_NOT_FOUND');
      const rows = await app.ctx.database.db
        .select()
        .from(chatMessage)
        .where(eq(chatMessage.id, original.id));
      expect(rows).toHaveLength(0);
    });

    it('stores a repeated clientMessageId once and answers only the sender', async () => {
      const a = await open(alice.cookie);
      const b = await open(bob.cookie);
      const clientMessageId = `retry-${randomUUID()}`;
      const first = await say(a, 'only once', { clientMessageId });
      await b.next('new_message', (e) => e.message.id === first.message.id);

      a.send({ type: 'send_message', message: 'only once (retry)', clientMessageId });
      const again = await a.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
      expect(again.message).toEqual(first.message);

      // A later message is a barrier: everything sent before it has reached b.
      const marker = await say(a, 'marker');
      await b.next('new_message', (e) => e.message.id === marker.message.id);
      expect(
        b.log.filter((e) => e.type === 'new_message' && e.message.clientMessageId === clientMessageId),
      ).toHaveLength(1);
      const rows = await app.ctx.database.db
        .select()
        .from(chatMessage)
        .where(eq(chatMessage.clientMessageId, clientMessageId));
      expect(rows).toHaveLength(1);

      // The same clientMessageId from another user is another message.
      const bobs = await say(b, 'same id, other user', { clientMessageId });
      expect(bobs.message.id).not.toBe(first.message.id);
    });

    it('relays typing to the other sockets, throttled per user', async () => {
      const a = await open(alice.cookie);
      const b = await open(bob.cookie);
      a.send({ type: 'typing', isTyping: true });
      a.send({ type: 'typing', isTyping: true });
      a.send({ type: 'typing', isTyping: true });
      a.send({ type: 'typing', isTyping: false });
      a.send({ type: 'typing', isTyping: false });
      const t1 = await b.next('typing', (e) => e.userId === alice.id);
      expect(t1).toEqual({ type: 'typing', userId: alice.id, userName: 'Alice', isTyping: true });
      const t2 = await b.next('typing', (e) => e.userId === alice.id);
      expect(t2.isTyping).toBe(false);
      const marker = await say(a, 'after typing');
      await b.next('new_message', (e) => e.message.id === marker.message.id);
      expect(b.log.filter((e) => e.type === 'typing' && e.userId === alice.id)).toHaveLength(2);
      // Not echoed to the socket it came from.
      expect(a.log.some((e) => e.type === 'typing' && e.userId === alice.id)).toBe(false);
    });
  });

  describe('purge', () => {
    it('deletes every message of a user for admins and broadcasts messages_purged', async () => {
      const victim = await createVerifiedUser(app, env.smtp, { name: 'Spammer' });
      const v = await open(victim.cookie);
      const watcher = await open(bob.cookie);
      for (let i = 0; i < 3; i++) await say(v, `spam ${i}`);

      const anonymous = await app.inject({ method: 'DELETE', url: `/admin/users/${victim.id}/messages` });
      expect(anonymous.statusCode).toBe(401);
      const member = await app.inject({
        method: 'DELETE',
        url: `/admin/users/${victim.id}/messages`,
        headers: { cookie: bob.cookie },
      });
      expect(member.statusCode).toBe(403);
      expect(member.json().code).toBe('FORBIDDEN');

      const res = await app.inject({
        method: 'DELETE',
        url: `/admin/users/${victim.id}/messages`,
        headers: { cookie: admin.cookie, origin: 'http://localhost:3000' },
      });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ deletedCount: 3 });
      const purged = await watcher.next('messages_purged');
      expect(purged).toEqual({ type: 'messages_purged', userId: victim.id, deletedCount: 3 });
      const left = await app.ctx.database.db
        .select()
        .from(chatMessage)
        .where(eq(chatMessage.userId, victim.id));
      expect(left).toHaveLength(0);

      const again = await app.inject({
        method: 'DELETE',
        url: `/admin/users/${victim.id}/messages`,
        headers: { cookie: admin.cookie },
      });
      expect(again.json()).toEqual({ deletedCount: 0 });
    });

    it('answers an unknown user id with deletedCount 0 and a NUL in the id with 400', async () => {
      const unknown = await app.inject({
        method: 'DELETE',
        url: `/admin/users/${randomUUID()}/messages`,
        headers: { cookie: admin.cookie },
      });
      expect(unknown.statusCode).toBe(200);
      expect(unknown.json()).toEqual({ deletedCount: 0 });
      const nul = await app.inject({
        method: 'DELETE',
        url: '/admin/users/a%00b/messages',
        headers: { cookie: admin.cookie },
      });
      expect(nul.statusCode).toBe(400);
      expect(nul.json().code).toBe('VALIDATION_ERROR');
    });
  });

  describe('user disconnections', () => {
    it('closes a banned user’s sockets with 1008 via the admin API and tells peers', async () => {
      const target = await createVerifiedUser(app, env.smtp, { name: 'Banned' });
      const t1 = await open(target.cookie);
      const t2 = await open(target.cookie);
      const peer = await open();
      const res = await app.inject({
        method: 'POST',
        url: '/auth/admin/ban-user',
        headers: jsonHeaders(admin.cookie),
        payload: { userId: target.id, banReason: 'spam' },
      });
      expect(res.statusCode).toBe(200);
      expect((await t1.closed).code).toBe(1008);
      expect((await t2.closed).code).toBe(1008);
      expect(await peer.next('user_disconnected', (e) => e.userId === target.id)).toEqual({
        type: 'user_disconnected',
        userId: target.id,
      });
      // A banned user's cookie no longer makes a member.
      const after = await open(target.cookie);
      expect(after.log[0]).toMatchObject({ role: 'guest', userId: null });
    });

    it("closes a demoted admin's sockets so they reconnect with the new role", async () => {
      const mod = await createAdmin(app, env.smtp);
      const s = await open(mod.cookie);
      expect(s.log[0]).toMatchObject({ type: 'connected', role: 'admin' });
      const peer = await open();
      const res = await app.inject({
        method: 'POST',
        url: '/auth/admin/set-role',
        headers: jsonHeaders(admin.cookie),
        payload: { userId: mod.id, role: 'user' },
      });
      expect(res.statusCode).toBe(200);
      const closed = await s.closed;
      expect(closed.code).toBe(4001);
      const again = await open(mod.cookie);
      expect(again.log[0]).toMatchObject({ type: 'connected', role: 'member', userId: mod.id });
      // Not a departure: peers are not told the user left (a later message proves the peer saw everything since).
      const sent = await say(await open(alice.cookie), 'marker after demotion');
      await peer.next('new_message', (e) => e.message.id === sent.message.id);
      expect(peer.log.some((e) => e.type === 'user_disconnected')).toBe(false);
    });

    it('closes a signed-out session with 4001', async () => {
      const target = await createVerifiedUser(app, env.smtp, { name: 'Leaver' });
      const s = await open(target.cookie);
      const res = await app.inject({
        method: 'POST',
        url: '/auth/sign-out',
        headers: { cookie: target.cookie, origin: 'http://localhost:3000' },
      });
      expect(res.statusCode).toBe(200);
      expect((await s.closed).code).toBe(4001);
    });
  });
});
