// Two app instances in one process sharing PostgreSQL and Redis (one test env): presence counts, messages,
// typing, purges and user disconnections cross instances through the bus, each exactly once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { type ChatClient, type ChatEvent, openChat } from '../helpers/ws-client.js';

describe('chat across two instances', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let alice: TestUser;
  let bob: TestUser;
  let admin: TestUser;
  const clients: ChatClient[] = [];
  const open = async (app: App, cookie?: string) => {
    const c = await openChat(app, { cookie });
    clients.push(c);
    return c;
  };
  const close = async (c: ChatClient) => {
    await c.close();
    clients.splice(clients.indexOf(c), 1);
  };

  beforeAll(async () => {
    env = await createTestEnv({
      CHAT_THROTTLE_LIMIT: '1000',
      PRESENCE_DEBOUNCE_MS: '30',
      HEARTBEAT_INTERVAL_MS: '250',
    });
    a = await env.app({ INSTANCE_ID: 'chat-a' });
    b = await env.app({ INSTANCE_ID: 'chat-b' });
    await Promise.all([a.listen({ port: 0, host: '127.0.0.1' }), b.listen({ port: 0, host: '127.0.0.1' })]);
    [alice, bob, admin] = await Promise.all([
      createVerifiedUser(a, env.smtp, { name: 'Alice' }),
      createVerifiedUser(a, env.smtp, { name: 'Bob' }),
      createAdmin(a, env.smtp),
    ]);
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await env.close();
  });

  it('counts presence cluster-wide: guests per connection, members and admins as distinct users', async () => {
    const watcher = await open(b);
    const want = (e: ChatEvent, g: number, m: number, ad: number) =>
      e.guests === g && e.members === m && e.admins === ad;
    const a1 = await open(a, alice.cookie);
    await open(b, alice.cookie); // same user on the other instance: still one member
    const bobSocket = await open(a, bob.cookie);
    await open(b, admin.cookie);
    const guestA = await open(a);
    await watcher.next('presence', (e) => want(e, 2, 2, 1));
    await close(bobSocket);
    await watcher.next('presence', (e) => want(e, 2, 1, 1));
    await close(a1);
    await close(guestA);
    // Alice is still connected on b, so she still counts.
    await watcher.next('presence', (e) => want(e, 1, 1, 1));
    expect(await a.ctx.realtime.presence.chatCounts()).toEqual({ guests: 1, members: 1, admins: 1 });
  });

  it('delivers a message sent on A to sockets on B exactly once, and edits, deletes and typing too', async () => {
    const sender = await open(a, alice.cookie);
    const onB = await open(b, bob.cookie);
    const guestB = await open(b);
    const clientMessageId = randomUUID();
    sender.send({ type: 'send_message', message: 'across', clientMessageId });
    const got = await onB.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
    await guestB.next('new_message', (e) => e.message.id === got.message.id);
    expect(got.message).toMatchObject({ userId: alice.id, message: 'across' });

    sender.send({ type: 'edit_message', messageId: got.message.id, message: 'across (edited)' });
    await onB.next('message_updated', (e) => e.message.id === got.message.id);
    onB.send({ type: 'typing', isTyping: true });
    expect(await sender.next('typing')).toEqual({
      type: 'typing',
      userId: bob.id,
      userName: 'Bob',
      isTyping: true,
    });
    sender.send({ type: 'delete_message', messageId: got.message.id });
    await guestB.next('message_deleted', (e) => e.messageId === got.message.id);

    // Barrier: a later message from A; everything before it has arrived on B.
    const marker = randomUUID();
    sender.send({ type: 'send_message', message: 'marker', clientMessageId: marker });
    await guestB.next('new_message', (e) => e.message.clientMessageId === marker);
    expect(
      guestB.log.filter((e) => e.type === 'new_message' && e.message.id === got.message.id),
    ).toHaveLength(1);
    expect(guestB.log.filter((e) => e.type === 'message_updated')).toHaveLength(1);
  });

  it('broadcasts an admin purge to every instance', async () => {
    const spammer = await createVerifiedUser(a, env.smtp);
    const s = await open(a, spammer.cookie);
    s.send({ type: 'send_message', message: 'spam', clientMessageId: 'p1' });
    await s.next('new_message', (e) => e.message.clientMessageId === 'p1');
    const onB = await open(b);
    const res = await b.inject({
      method: 'DELETE',
      url: `/admin/users/${spammer.id}/messages`,
      headers: { cookie: admin.cookie },
    });
    expect(res.json()).toEqual({ deletedCount: 1 });
    expect(await s.next('messages_purged')).toEqual({
      type: 'messages_purged',
      userId: spammer.id,
      deletedCount: 1,
    });
    await onB.next('messages_purged', (e) => e.userId === spammer.id);
  });

  it('closes a banned user’s sockets on every instance and tells peers everywhere', async () => {
    const target = await createVerifiedUser(a, env.smtp);
    const onA = await open(a, target.cookie);
    const onB = await open(b, target.cookie);
    const peerA = await open(a);
    const peerB = await open(b);
    const res = await b.inject({
      method: 'POST',
      url: '/auth/admin/ban-user',
      headers: jsonHeaders(admin.cookie),
      payload: { userId: target.id },
    });
    expect(res.statusCode).toBe(200);
    expect((await onA.closed).code).toBe(1008);
    expect((await onB.closed).code).toBe(1008);
    await peerA.next('user_disconnected', (e) => e.userId === target.id);
    await peerB.next('user_disconnected', (e) => e.userId === target.id);
  });
});
