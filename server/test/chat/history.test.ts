// Chat history: the last 100 messages on connect (oldest first) and GET /chat/history keyset paging on
// (createdAt, seq), including messages that share a millisecond.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { chatMessage } from '../../src/infra/schema/chat.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser, type TestUser } from '../helpers/users.js';
import { type ChatClient, openChat } from '../helpers/ws-client.js';

interface Msg {
  id: string;
  message: string;
  createdAt: string;
}

describe('chat history', () => {
  let env: TestEnv;
  let app: App;
  let user: TestUser;
  const clients: ChatClient[] = [];
  const TOTAL = 130;
  const base = Date.parse('2026-01-01T00:00:00.000Z');
  const history = async (query: string, cookie = user.cookie) =>
    app.inject({ method: 'GET', url: `/chat/history${query}`, headers: { cookie } });

  beforeAll(async () => {
    env = await createTestEnv({ CHAT_THROTTLE_LIMIT: '1000' });
    app = await env.app();
    await app.listen({ port: 0, host: '127.0.0.1' });
    user = await createVerifiedUser(app, env.smtp, { name: 'Historian' });
    // Three messages per millisecond: order inside a millisecond is decided by seq (insertion order).
    for (let i = 0; i < TOTAL; i++) {
      await app.ctx.database.db.insert(chatMessage).values({
        userId: user.id,
        userName: 'Historian',
        message: `m${i}`,
        createdAt: new Date(base + Math.floor(i / 3)),
      });
    }
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await env.close();
  });

  it('sends the last 100 messages, oldest first, on connect', async () => {
    const c = await openChat(app);
    clients.push(c);
    const messages = c.log[1]?.messages as Msg[];
    expect(messages.map((m) => m.message)).toEqual(Array.from({ length: 100 }, (_, i) => `m${i + 30}`));
  });

  it('pages back by message id through every message exactly once', async () => {
    const first = await history('?limit=10');
    expect(first.statusCode).toBe(200);
    let page = first.json().messages as Msg[];
    expect(page.map((m) => m.message)).toEqual(Array.from({ length: 10 }, (_, i) => `m${i + 120}`));
    const seen = [...page];
    while (page.length > 0) {
      const res = await history(`?limit=7&before=${page[0]?.id}`);
      expect(res.statusCode).toBe(200);
      page = res.json().messages as Msg[];
      seen.unshift(...page);
    }
    expect(seen.map((m) => m.message)).toEqual(Array.from({ length: TOTAL }, (_, i) => `m${i}`));
  });

  it('pages back by ISO timestamp (strictly older)', async () => {
    const at = new Date(base + 20).toISOString(); // m60..m62 share this millisecond
    const res = await history(`?limit=10&before=${encodeURIComponent(at)}`);
    expect(res.statusCode).toBe(200);
    expect((res.json().messages as Msg[]).map((m) => m.message)).toEqual(
      Array.from({ length: 10 }, (_, i) => `m${i + 50}`),
    );
  });

  it('defaults to 50 and caps at 100', async () => {
    expect((await history('')).json().messages).toHaveLength(50);
    expect((await history('?limit=100')).json().messages).toHaveLength(100);
  });

  it.each([
    ['?limit=0', 400],
    ['?limit=101', 400],
    ['?limit=abc', 400],
    ['?limit=1.5', 400],
    ['?before=yesterday', 400],
    ['?before=2026-13-45T00:00:00Z', 400],
    ['?unknown=1', 400],
    ['?before=00000000-0000-4000-8000-000000000000', 404],
  ])('answers %s with %i and the error body', async (query, status) => {
    const res = await history(query);
    expect(res.statusCode).toBe(status);
    expect(typeof res.json().code).toBe('string');
  });

  it.each([
    ['0000-01-01T00:00:00Z', 0],
    ['0001-01-01T00:30:00+01:00', 0],
    ['9999-12-31T23:59:59-05:00', 5],
  ])('answers a before=%s at the edge of the timestamp range without failing', async (at, count) => {
    const res = await history(`?limit=5&before=${encodeURIComponent(at)}`);
    expect(res.statusCode).toBe(200);
    expect(res.json().messages).toHaveLength(count);
  });

  it('requires a session', async () => {
    const res = await app.inject({ method: 'GET', url: '/chat/history' });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('UNAUTHORIZED');
  });

  it('includes a new message in the history of the next connection (cache invalidated)', async () => {
    const first = await openChat(app);
    const writer = await openChat(app, { cookie: user.cookie });
    clients.push(first, writer);
    writer.send({ type: 'send_message', message: 'fresh', clientMessageId: 'fresh-1' });
    await first.next('new_message', (e) => e.message.clientMessageId === 'fresh-1');
    const next = await openChat(app);
    clients.push(next);
    const messages = next.log[1]?.messages as Msg[];
    expect(messages).toHaveLength(100);
    expect(messages.at(-1)?.message).toBe('fresh');
  });
});
