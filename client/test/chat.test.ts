import { afterEach, describe, expect, it } from 'vitest';
import { type ChatClient, HeraldChatError, mergeHistory } from '../src/chat.js';
import type { ChatMessage } from '../src/contract.js';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import { FakeEnvironment, FakeSocket, tick, waitFor } from './fakes.js';

let clients: HeraldClient[] = [];
afterEach(() => {
  for (const c of clients) c.close();
  clients = [];
});

const msg = (id: string, extra: Partial<ChatMessage> = {}): ChatMessage => ({
  id,
  userId: 'u1',
  userName: 'Ada',
  userAvatar: null,
  message: `text ${id}`,
  createdAt: `2026-01-01T00:00:${id.padStart(2, '0')}.000Z`,
  ...extra,
});

function setup(
  opts: {
    session?: boolean;
    abuseDelayMs?: number;
    history?: ChatMessage[];
    baseDelayMs?: number;
    maxDelayMs?: number;
  } = {},
) {
  const sockets: FakeSocket[] = [];
  let sessionChecks = 0;
  const historyCalls: string[] = [];
  const openSocket = (url: string) => {
    const s = new FakeSocket(url);
    sockets.push(s);
    return s;
  };
  const client = createHeraldClient({
    baseURL: 'https://chat.example',
    fetch: async (input) => {
      const url = new URL(String(input));
      if (url.pathname === '/chat/history') {
        historyCalls.push(url.search);
        return Response.json({ messages: opts.history ?? [] });
      }
      if (url.pathname === '/auth/get-session') {
        sessionChecks++;
        return Response.json(
          opts.session === false
            ? null
            : { session: { id: 's', userId: 'u1' }, user: { id: 'u1', email: 'a@b.c', name: 'Ada' } },
        );
      }
      return Response.json({ code: 'NOT_FOUND', message: 'no' }, { status: 404 });
    },
    WebSocket: openSocket,
    environment: new FakeEnvironment(),
    random: () => 0.5,
    locks: null,
    BroadcastChannel: null,
    chat: {
      baseDelayMs: opts.baseDelayMs ?? 4,
      maxDelayMs: opts.maxDelayMs ?? 20,
      abuseDelayMs: opts.abuseDelayMs ?? 10,
      typingTimeoutMs: 40,
      ownTypingTimeoutMs: 30,
    },
  });
  clients.push(client);
  return { client, chat: client.chat, sockets, sessionChecks: () => sessionChecks, historyCalls };
}

async function opened(
  chat: ChatClient,
  sockets: FakeSocket[],
  index = 0,
  history: ChatMessage[] = [],
): Promise<FakeSocket> {
  const s = await waitFor(() => sockets[index], `socket ${index}`);
  s.accept({}, history);
  await waitFor(() => chat.getState().status === 'open');
  return s;
}

describe('chat socket', () => {
  it('connects to ws(s)://<base>/chat and applies history, messages, edits, deletes, purges and presence', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s = await opened(chat, sockets);
    expect(s.url).toBe('wss://chat.example/chat');
    expect(chat.getState()).toMatchObject({
      connectionId: 'c1',
      userId: 'u1',
      role: 'member',
      instanceId: 'node-0',
    });
    s.emit({ type: 'message_history', messages: [msg('1'), msg('2', { userId: 'u2' })] });
    s.emit({ type: 'new_message', message: msg('3') });
    s.emit({ type: 'message_updated', message: msg('1', { message: 'edited', editedAt: 'x' }) });
    s.emit({ type: 'message_deleted', messageId: '3' });
    s.emit({ type: 'presence', guests: 1, members: 2, admins: 0 });
    expect(chat.getState().messages.map((m) => [m.id, m.message])).toEqual([
      ['1', 'edited'],
      ['2', 'text 2'],
    ]);
    s.emit({ type: 'messages_purged', userId: 'u2', deletedCount: 1 });
    expect(chat.getState().messages.map((m) => m.id)).toEqual(['1']);
    expect(chat.getState().presence).toEqual({ guests: 1, members: 2, admins: 0 });
  });

  it('send() resolves with the stored message carrying its clientMessageId', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s = await opened(chat, sockets);
    const p = chat.send('hello');
    const frame = s.sentOf('send_message')[0];
    expect(frame).toMatchObject({ type: 'send_message', message: 'hello' });
    expect(typeof frame?.clientMessageId).toBe('string');
    // Someone else's message with another id does not resolve it.
    s.emit({ type: 'new_message', message: msg('9', { userId: 'u2', clientMessageId: 'other' }) });
    s.emit({
      type: 'new_message',
      message: msg('10', { clientMessageId: frame?.clientMessageId as string }),
    });
    await expect(p).resolves.toMatchObject({ id: '10', message: 'text 10' });
  });

  it('re-sends unconfirmed messages with the same clientMessageId after a reconnect', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s1 = await opened(chat, sockets);
    const p = chat.send('survives', { clientMessageId: 'cm-1' });
    expect(s1.sentOf('send_message')).toHaveLength(1);
    s1.serverClose(1006);
    expect(chat.getState().status).toBe('reconnecting');
    const s2 = await waitFor(() => sockets[1], 'reconnect');
    s2.accept();
    expect(s2.sentOf('send_message')).toEqual([
      { type: 'send_message', message: 'survives', clientMessageId: 'cm-1' },
    ]);
    s2.emit({ type: 'new_message', message: msg('5', { clientMessageId: 'cm-1' }) });
    await expect(p).resolves.toMatchObject({ id: '5' });
    expect(chat.getState().messages.map((m) => m.id)).toEqual(['5']);
  });

  it('a send made before the socket opens goes out once connected', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const p = chat.send('early', { clientMessageId: 'e-1' });
    const s = await opened(chat, sockets);
    expect(s.sentOf('send_message')).toHaveLength(1);
    s.emit({ type: 'new_message', message: msg('1', { clientMessageId: 'e-1' }) });
    await expect(p).resolves.toMatchObject({ id: '1' });
  });

  it("sends wait for the history after connected; a history failure is not taken for a send's answer", async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s1 = await waitFor(() => sockets[0]);
    s1.accept({}, null);
    const p = chat.send('queued', { clientMessageId: 'q-1' });
    expect(s1.sentOf('send_message')).toHaveLength(0);
    s1.emit({ type: 'error', code: 'INTERNAL_ERROR', message: 'History is unavailable' });
    expect(s1.sentOf('send_message')).toHaveLength(1);
    s1.emit({ type: 'new_message', message: msg('1', { clientMessageId: 'q-1' }) });
    await expect(p).resolves.toMatchObject({ id: '1' });
  });

  it('an error reply rejects the send with its code; throttled rejects and sets throttledUntil', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s = await opened(chat, sockets);
    const tooLong = chat.send('x');
    s.emit({ type: 'error', code: 'MESSAGE_TOO_LONG', message: 'too long' });
    await expect(tooLong).rejects.toMatchObject({ name: 'HeraldChatError', code: 'MESSAGE_TOO_LONG' });
    const before = Date.now();
    const throttled = chat.send('y');
    s.emit({ type: 'throttled', retryAfterMs: 4000, limit: 5, windowMs: 10_000 });
    await expect(throttled).rejects.toBeInstanceOf(HeraldChatError);
    expect(chat.getState().throttledUntil).toBeGreaterThanOrEqual(before + 4000);
  });

  it('refuses a frame over 16 KiB without sending it', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s = await opened(chat, sockets);
    await expect(chat.send('x'.repeat(17 * 1024))).rejects.toMatchObject({ code: 'MESSAGE_TOO_LONG' });
    expect(s.sentOf('send_message')).toHaveLength(0);
  });

  it('1008 (banned) stops: status banned, pending sends rejected, no reconnect', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s = await opened(chat, sockets);
    const p = chat.send('hi');
    s.serverClose(1008, 'banned');
    await expect(p).rejects.toMatchObject({ code: 'BANNED' });
    expect(chat.getState().status).toBe('banned');
    await tick(60);
    expect(sockets).toHaveLength(1);
  });

  it('after a ban the same holder stays out; another signed-in user (or connect()) reopens', async () => {
    const { chat, sockets } = setup();
    const release = chat.retain('u1');
    const s = await opened(chat, sockets);
    s.serverClose(1008, 'banned');
    expect(chat.getState().status).toBe('banned');
    release();
    const again = chat.retain('u1');
    await tick(30);
    expect(sockets).toHaveLength(1);
    again();
    chat.retain('u2');
    await opened(chat, sockets, 1);
  });

  it('1008 "slow consumer", 1001, 1006 and 1009 reconnect (1009 surfaces an error)', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    let s = await opened(chat, sockets);
    const closes: Array<[number, string]> = [
      [1008, 'slow consumer'],
      [1001, 'going away'],
      [1006, ''],
      [1009, ''],
    ];
    for (const [i, [code, reason]] of closes.entries()) {
      s.serverClose(code, reason);
      s = await opened(chat, sockets, i + 1);
    }
    expect(sockets).toHaveLength(5);
    s.serverClose(1009);
    expect(chat.getState().error?.code).toBe('TOO_BIG');
  });

  it('4001 re-reads the session and reconnects at once; signed out, pending sends are rejected', async () => {
    const member = setup();
    member.chat.connect();
    const s = await opened(member.chat, member.sockets);
    s.serverClose(4001, 'account changed');
    await waitFor(() => member.sockets[1]);
    expect(member.sessionChecks()).toBe(1);

    // A 60 s backoff window: a prompt reconnect can only be the 4001 path, which does not wait.
    const guest = setup({ session: false, baseDelayMs: 60_000 });
    guest.chat.connect();
    const g = await opened(guest.chat, guest.sockets);
    const p = guest.chat.send('lost');
    g.serverClose(4001, 'session ended');
    await expect(p).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    const again = await waitFor(() => guest.sockets[1], 'reconnect as guest');
    again.accept({ userId: null, role: 'guest' });
    await waitFor(() => guest.chat.getState().role === 'guest');
  });

  it('repeated 4001 closes back off instead of looping', async () => {
    const { chat, sockets } = setup({ baseDelayMs: 60_000, maxDelayMs: 60_000 });
    chat.connect();
    const s = await opened(chat, sockets);
    s.serverClose(4001, 'account changed');
    const again = await opened(chat, sockets, 1);
    again.serverClose(4001, 'account changed');
    await tick(50);
    expect(sockets).toHaveLength(2);
    expect(chat.getState().status).toBe('reconnecting');
  });

  it('4029 backs off longer before reconnecting', async () => {
    const { chat, sockets } = setup({ abuseDelayMs: 150 });
    chat.connect();
    const s = await opened(chat, sockets);
    s.serverClose(4029, 'abuse');
    // Within the normal backoff window (≤ 4 ms × 2^n) nothing happens; the abuse delay has to pass first.
    await tick(40);
    expect(sockets).toHaveLength(1);
    await waitFor(() => sockets[1], 'reconnect after the abuse delay');
  });

  it('typing indicators appear and clear on false, on disconnect and after the timeout', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s = await opened(chat, sockets);
    s.emit({ type: 'typing', userId: 'u2', userName: 'Bob', isTyping: true });
    s.emit({ type: 'typing', userId: 'u3', userName: 'Cy', isTyping: true });
    expect(chat.getState().typing.map((t) => t.userName)).toEqual(['Bob', 'Cy']);
    s.emit({ type: 'typing', userId: 'u2', userName: 'Bob', isTyping: false });
    s.emit({ type: 'user_disconnected', userId: 'u9' });
    expect(chat.getState().typing.map((t) => t.userName)).toEqual(['Cy']);
    await waitFor(() => chat.getState().typing.length === 0, 'typing timeout');
    chat.setTyping(true);
    chat.setTyping(true);
    chat.setTyping(false);
    chat.setTyping(false);
    expect(s.sentOf('typing')).toEqual([
      { type: 'typing', isTyping: true },
      { type: 'typing', isTyping: false },
    ]);
    // Typing then going quiet: `false` follows by itself.
    const { setTyping } = chat;
    setTyping(true);
    await waitFor(() => s.sentOf('typing').length === 4, 'automatic typing: false');
    expect(s.sentOf('typing')[3]).toEqual({ type: 'typing', isTyping: false });
  });

  it('loadOlder pages before the oldest message; a reconnect history keeps older pages', async () => {
    const older = [msg('1'), msg('2')];
    const { chat, sockets, historyCalls } = setup({ history: older });
    chat.connect();
    const s = await opened(chat, sockets);
    s.emit({ type: 'message_history', messages: [msg('3'), msg('4')] });
    expect(await chat.loadOlder(2)).toBe(2);
    expect(historyCalls).toEqual(['?limit=2&before=3']);
    expect(chat.getState().messages.map((m) => m.id)).toEqual(['1', '2', '3', '4']);
    expect(chat.getState().hasMore).toBe(true);
    s.serverClose(1006);
    // While away 4 was deleted and 5 arrived.
    await opened(chat, sockets, 1, [msg('3'), msg('5')]);
    expect(chat.getState().messages.map((m) => m.id)).toEqual(['1', '2', '3', '5']);
  });

  it('mergeHistory keeps loaded pages older than the history window', () => {
    expect(mergeHistory([msg('1'), msg('2'), msg('3')], [msg('3'), msg('4')]).map((m) => m.id)).toEqual([
      '1',
      '2',
      '3',
      '4',
    ]);
    expect(mergeHistory([msg('1')], [])).toEqual([]);
  });

  it('disconnect() closes the socket, rejects pending sends and does not reconnect', async () => {
    const { chat, sockets } = setup();
    chat.connect();
    const s = await opened(chat, sockets);
    const p = chat.send('bye');
    chat.disconnect();
    await expect(p).rejects.toMatchObject({ code: 'CLOSED' });
    expect(s.closedByClient?.code).toBe(1000);
    expect(chat.getState().status).toBe('closed');
    await tick(40);
    expect(sockets).toHaveLength(1);
  });
});

describe('a refused origin', () => {
  const start = (trusted: boolean) => {
    const sockets: FakeSocket[] = [];
    const openSocket = (url: string) => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s;
    };
    let checks = 0;
    const client = createHeraldClient({
      baseURL: 'https://chat.example',
      fetch: async (input) => {
        const url = new URL(String(input));
        if (url.pathname === '/client-config') {
          checks++;
          return Response.json({
            socialProvider: null,
            emailDelivery: 'log',
            origin: { value: 'http://refused.example', trusted, setting: 'CORS_ALLOWLISTED_ORIGINS' },
          });
        }
        return Response.json(null);
      },
      WebSocket: openSocket,
      environment: new FakeEnvironment(),
      random: () => 0,
      chat: { baseDelayMs: 1, maxDelayMs: 2 },
    });
    clients.push(client);
    return { client, sockets, checks: () => checks };
  };

  it('stops reconnecting once the service says the origin is not allowed, with a message naming the setting', async () => {
    const { client, sockets, checks } = start(false);
    client.chat.connect();
    // The upgrade answered 403: the browser reports 1006 before any frame.
    (await waitFor(() => sockets[0], 'first socket')).serverClose(1006);
    (await waitFor(() => sockets[1], 'second socket')).serverClose(1006);
    await waitFor(() => client.chat.getState().status === 'refused', 'refused');
    expect(client.chat.getState().error?.code).toBe('ORIGIN_NOT_ALLOWED');
    expect(client.chat.getState().error?.message).toContain('CORS_ALLOWLISTED_ORIGINS');
    expect(client.chat.getState().error?.message).toContain('http://refused.example');
    expect(checks()).toBe(1);
    await tick(30);
    expect(sockets).toHaveLength(2);
    // connect() tries again (the operator may have fixed the setting).
    client.chat.connect();
    await waitFor(() => sockets[2], 'retry after connect()');
  });

  it('keeps reconnecting when the origin is trusted (another cause)', async () => {
    const { client, sockets, checks } = start(true);
    client.chat.connect();
    (await waitFor(() => sockets[0], 'first socket')).serverClose(1006);
    (await waitFor(() => sockets[1], 'second socket')).serverClose(1006);
    await waitFor(() => sockets[2], 'third socket');
    expect(checks()).toBe(1);
    expect(client.chat.getState().status).not.toBe('refused');
  });
});
