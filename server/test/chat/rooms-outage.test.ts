// A room's messages survive a store outage live: two instances on a private redis-server that is killed while
// messages are sent on one instance. Nothing reaches the other instance meanwhile (the bus is down); once the
// store is back, every instance catches its rooms up from PostgreSQL, so subscribers get the missed messages
// in order, each once, without reconnecting. A socket that did reconnect resumes with sinceSeq.
// A change that only the sender kept (its publish stayed local while the others' buses were fine) reaches them
// through the sender's owed `sync`, with no later message to reveal the gap (chat/service/resync.ts).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { startRedisServer, type TestRedis } from '../helpers/redis-server.js';
import { createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { type ChatClient, chatUrl, openChat } from '../helpers/ws-client.js';

const until = async (check: () => boolean, what: string, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe('chat rooms through a store outage', () => {
  let redis: TestRedis;
  let env: TestEnv;
  let a: App;
  let b: App;
  let alice: TestUser;
  let bob: TestUser;
  const clients: ChatClient[] = [];
  const open = async (app: App, cookie: string) => {
    const c = await openChat(`${chatUrl(app)}?rooms=1`, { cookie });
    clients.push(c);
    return c;
  };

  /** A private room of Alice's with Bob, created on `app`. */
  const createRoom = async (app: App, name: string) => {
    const res = await app.inject({
      method: 'POST',
      url: '/chat/rooms',
      headers: jsonHeaders(alice.cookie),
      payload: { name, kind: 'private', memberIds: [bob.id] },
    });
    return res.json().room.id as string;
  };
  const subscribeAll = async (roomId: string, clients: ChatClient[]) => {
    for (const c of clients) {
      c.send({ type: 'subscribe', roomId });
      await c.next('subscribed', (e) => e.roomId === roomId);
    }
  };
  /** Sends as the SDK does and resolves with the writer's own `new_message` (stored). */
  const sender = (writer: ChatClient, roomId: string) => (text: string) => {
    const clientMessageId = randomUUID();
    writer.send({ type: 'send_message', roomId, message: text, clientMessageId });
    return writer.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    env = await createTestEnv({ CACHE_URL: redis.url, CHAT_THROTTLE_LIMIT: '1000' });
    a = await env.app({ INSTANCE_ID: 'outage-a' });
    b = await env.app({ INSTANCE_ID: 'outage-b' });
    await Promise.all([a.listen({ port: 0, host: '127.0.0.1' }), b.listen({ port: 0, host: '127.0.0.1' })]);
    [alice, bob] = await Promise.all([
      createVerifiedUser(a, env.smtp, { name: 'Alice' }),
      createVerifiedUser(a, env.smtp, { name: 'Bob' }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await env.close();
    await redis.close();
  });

  it('delivers what was sent during the outage once the store is back, in order and once each', async () => {
    const roomId = await createRoom(a, 'outage');
    const writer = await open(a, alice.cookie);
    const reader = await open(b, bob.cookie);
    const leaver = await open(b, bob.cookie);
    await subscribeAll(roomId, [writer, reader, leaver]);
    const send = sender(writer, roomId);
    await send('before');
    await reader.next('new_message', (e) => e.message.message === 'before');
    const leftAt = (await leaver.next('new_message', (e) => e.message.message === 'before')).message
      .seq as number;
    await leaver.close();

    await redis.stop();
    await until(() => a.ctx.realtime.bus.isDegraded() && b.ctx.realtime.bus.isDegraded(), 'degraded buses');
    // Stored in PostgreSQL on A; B cannot hear about them.
    await send('during 1');
    await send('during 2');
    expect(reader.log.some((e) => e.type === 'new_message' && e.message.message.startsWith('during'))).toBe(
      false,
    );

    await redis.start();
    await until(
      () => !a.ctx.realtime.bus.isDegraded() && !b.ctx.realtime.bus.isDegraded(),
      'recovered buses',
    );
    await reader.next('new_message', (e) => e.message.message === 'during 2', 20_000);
    await send('after');
    await reader.next('new_message', (e) => e.message.message === 'after');
    const seqs = reader.log
      .filter((e) => e.type === 'new_message' && e.roomId === roomId)
      .map((e) => e.message.seq as number);
    expect(seqs).toEqual([1, 2, 3, 4]);

    // The socket that was gone resumes from its last seq on the other instance.
    const back = await open(a, bob.cookie);
    back.send({ type: 'subscribe', roomId, sinceSeq: leftAt });
    expect(await back.next('subscribed')).toMatchObject({ replayed: 3, resync: false, lastSeq: 4 });
    const replayed = [];
    for (let i = 0; i < 3; i++) replayed.push((await back.next('new_message')).message.message);
    expect(replayed).toEqual(['during 1', 'during 2', 'after']);
  });

  it('a change whose publish stayed on the sender reaches the other instance with no later message', async () => {
    // A real local-only publish with every bus healthy: instance C's bus bound is its minimum (1 KiB), so a
    // message of 400 four-byte characters is stored and delivered on C but never sent to D.
    const c = await env.app({ INSTANCE_ID: 'outage-c', BUS_MAX_PAYLOAD_BYTES: '1024' });
    const d = await env.app({ INSTANCE_ID: 'outage-d' });
    await Promise.all([c.listen({ port: 0, host: '127.0.0.1' }), d.listen({ port: 0, host: '127.0.0.1' })]);
    await until(() => !c.ctx.realtime.bus.isDegraded() && !d.ctx.realtime.bus.isDegraded(), 'healthy buses');
    const roomId = await createRoom(c, 'local only');
    const writer = await open(c, alice.cookie);
    const reader = await open(d, bob.cookie);
    await subscribeAll(roomId, [writer, reader]);
    const send = sender(writer, roomId);
    await send('small');
    await reader.next('new_message', (e) => e.message.message === 'small');
    const big = '\u{1F600}'.repeat(400);
    const failuresBefore = c.ctx.realtime.bus.stats().publishFailures;
    await send(big);
    await until(() => c.ctx.realtime.bus.stats().publishFailures > failuresBefore, 'the refused publish');
    const got = await reader.next('new_message', (e) => e.message.message === big, 20_000);
    expect(got.message.seq).toBe(2);
    expect(
      reader.log.filter((e) => e.type === 'new_message' && e.roomId === roomId).map((e) => e.message.seq),
    ).toEqual([1, 2]);
  });
});
