// chat.rooms: the HTTP calls and a room's live state over a fake socket — the first subscribe loads the newest
// page, a reconnect resubscribes with the last seq and revision (the server's replay then applies without
// duplicates), a seq gap seen live resubscribes from what is held, `resync` reloads, removal ends the room.
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatServerEvent, RoomMessage } from '../src/contract.js';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import { FakeEnvironment, FakeSocket, waitFor } from './fakes.js';

let clients: HeraldClient[] = [];
afterEach(() => {
  for (const c of clients) c.close();
  clients = [];
});

const ROOM = '6f1c2a4e-8b0d-4c6e-9a51-3d2f7e8b9c10';
const rm = (seq: number, extra: Partial<RoomMessage> = {}): RoomMessage => ({
  id: `m${seq}`,
  roomId: ROOM,
  seq,
  userId: 'u2',
  userName: 'Bob',
  userAvatar: null,
  message: `text ${seq}`,
  createdAt: `2026-01-01T00:00:${String(seq).padStart(2, '0')}.000Z`,
  ...extra,
});

function setup(page: RoomMessage[] = [], mine: Array<Record<string, unknown>> = []) {
  const sockets: FakeSocket[] = [];
  const openSocket = (url: string) => {
    const s = new FakeSocket(url);
    sockets.push(s);
    return s;
  };
  const requests: Array<{ method: string; path: string; search: string; body?: unknown }> = [];
  const client = createHeraldClient({
    baseURL: 'https://chat.example',
    fetch: async (input, init = {}) => {
      const url = new URL(String(input));
      const body = init.body ? JSON.parse(String(init.body)) : undefined;
      requests.push({ method: init.method ?? 'GET', path: url.pathname, search: url.search, body });
      if (url.pathname === `/chat/rooms/${ROOM}/messages`) {
        return Response.json({ messages: page, hasMore: false });
      }
      if (url.pathname === '/chat/rooms') {
        if (init.method === 'POST') return Response.json({ room: { id: ROOM, ...body } }, { status: 201 });
        return Response.json({ rooms: mine });
      }
      if (url.pathname === '/chat/direct') return Response.json({ room: { id: ROOM, kind: 'direct' } });
      if (url.pathname === '/auth/get-session') {
        return Response.json({ session: { id: 's' }, user: { id: 'u1', email: 'a@b.c', name: 'Ada' } });
      }
      return Response.json({ code: 'NOT_FOUND', message: 'no' }, { status: 404 });
    },
    WebSocket: openSocket,
    environment: new FakeEnvironment(),
    random: () => 0.5,
    locks: null,
    BroadcastChannel: null,
    chat: { baseDelayMs: 4, maxDelayMs: 20 },
  });
  clients.push(client);
  return { client, sockets, requests };
}

const emit = (s: FakeSocket, e: Record<string, unknown>) => s.emit(e as unknown as ChatServerEvent);

describe('chat.rooms', () => {
  it('calls the room routes', async () => {
    const { client, requests } = setup();
    await client.chat.rooms.create({ name: 'Design', kind: 'private', memberIds: ['u2'] });
    await client.chat.rooms.direct('u2');
    await client.chat.rooms.list('public');
    expect(requests.map((r) => [r.method, r.path, r.search])).toEqual([
      ['POST', '/chat/rooms', ''],
      ['POST', '/chat/direct', ''],
      ['GET', '/chat/rooms', '?scope=public'],
    ]);
    expect(requests[0]?.body).toEqual({ name: 'Design', kind: 'private', memberIds: ['u2'] });
  });

  it('follows a room, resumes after a reconnect with its last seq and rev, and fills a live gap', async () => {
    const { client, sockets, requests } = setup([rm(1), rm(2)]);
    const room = client.chat.rooms.room(ROOM);
    const release = room.retain();
    const s1 = await waitFor(() => sockets[0], 'socket');
    s1.accept();
    await waitFor(() => s1.sentOf('subscribe').length > 0, 'subscribe');
    expect(s1.sentOf('subscribe')[0]).toEqual({ type: 'subscribe', roomId: ROOM });
    emit(s1, { type: 'subscribed', roomId: ROOM, lastSeq: 2, rev: 2, replayed: 0, resync: false });
    await waitFor(() => room.getState().status === 'live', 'first page');
    expect(requests.some((r) => r.path === `/chat/rooms/${ROOM}/messages`)).toBe(true);
    emit(s1, { type: 'new_message', roomId: ROOM, rev: 3, message: rm(3) });
    emit(s1, { type: 'message_updated', roomId: ROOM, rev: 4, message: rm(1, { message: 'edited' }) });
    expect(room.getState().messages.map((m) => [m.seq, m.message])).toEqual([
      [1, 'edited'],
      [2, 'text 2'],
      [3, 'text 3'],
    ]);

    s1.serverClose(1006);
    const s2 = await waitFor(() => sockets[1], 'reconnect');
    s2.accept();
    await waitFor(() => s2.sentOf('subscribe').length > 0, 'resubscribe');
    expect(s2.sentOf('subscribe')[0]).toEqual({ type: 'subscribe', roomId: ROOM, sinceSeq: 3, sinceRev: 4 });
    emit(s2, { type: 'subscribed', roomId: ROOM, lastSeq: 4, rev: 6, replayed: 2, resync: false });
    emit(s2, { type: 'new_message', roomId: ROOM, rev: 5, message: rm(4) });
    emit(s2, { type: 'message_deleted', roomId: ROOM, rev: 6, messageId: 'm2', seq: 2 });
    // A duplicate (same rev) changes nothing.
    emit(s2, { type: 'new_message', roomId: ROOM, rev: 5, message: rm(4, { message: 'dup' }) });
    expect(room.getState().messages.map((m) => m.seq)).toEqual([1, 3, 4]);
    expect(room.getState().lastSeq).toBe(4);

    // seq 5 never arrived: seq 6 is not applied; the client asks for everything after what it holds.
    emit(s2, { type: 'new_message', roomId: ROOM, rev: 8, message: rm(6) });
    expect(room.getState().messages.map((m) => m.seq)).toEqual([1, 3, 4]);
    expect(s2.sentOf('subscribe').at(-1)).toEqual({
      type: 'subscribe',
      roomId: ROOM,
      sinceSeq: 4,
      sinceRev: 6,
    });
    emit(s2, { type: 'subscribed', roomId: ROOM, lastSeq: 6, rev: 8, replayed: 2, resync: false });
    emit(s2, { type: 'new_message', roomId: ROOM, rev: 7, message: rm(5) });
    emit(s2, { type: 'new_message', roomId: ROOM, rev: 8, message: rm(6) });
    expect(room.getState().messages.map((m) => m.seq)).toEqual([1, 3, 4, 5, 6]);
    release();
    expect(s2.sentOf('unsubscribe')).toEqual([{ type: 'unsubscribe', roomId: ROOM }]);
  });

  it('reloads on resync, resolves sends by clientMessageId, and ends on removal', async () => {
    const { client, sockets } = setup([rm(9)]);
    const room = client.chat.rooms.room(ROOM);
    room.retain();
    const s = await waitFor(() => sockets[0], 'socket');
    s.accept();
    await waitFor(() => s.sentOf('subscribe').length > 0, 'subscribe');
    emit(s, { type: 'subscribed', roomId: ROOM, lastSeq: 9, rev: 9, replayed: 0, resync: true });
    await waitFor(() => room.getState().status === 'live', 'reload');
    expect(room.getState().messages.map((m) => m.seq)).toEqual([9]);
    const sent = room.send('hi');
    const frame = s.sentOf('send_message')[0];
    expect(frame).toMatchObject({ roomId: ROOM, message: 'hi' });
    emit(s, {
      type: 'new_message',
      roomId: ROOM,
      rev: 10,
      message: rm(10, { userId: 'u1', message: 'hi', clientMessageId: frame?.clientMessageId as string }),
    });
    await expect(sent).resolves.toMatchObject({ seq: 10, message: 'hi' });
    emit(s, { type: 'read', roomId: ROOM, userId: 'u2', seq: 10 });
    expect(room.getState().reads).toEqual({ u2: 10 });
    emit(s, { type: 'presence', roomId: ROOM, online: 2, userIds: ['u1', 'u2'] });
    expect(room.getState().presence).toEqual({ online: 2, userIds: ['u1', 'u2'] });
    const pending = room.send('too late');
    emit(s, { type: 'unsubscribed', roomId: ROOM, reason: 'removed' });
    await expect(pending).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(room.getState().status).toBe('removed');
    // Frames of other rooms never reach the general chat state.
    expect(client.chat.getState().messages).toEqual([]);
  });

  it('a room shown while the room list follows it too still resumes exactly after a reconnect', async () => {
    const listed = { id: ROOM, kind: 'direct', name: 'Bob', lastSeq: 2, lastReadSeq: 2, unreadCount: 0 };
    const { client, sockets } = setup([rm(1), rm(2)], [listed]);
    const room = client.chat.rooms.room(ROOM);
    const releaseRoom = room.retain();
    const s1 = await waitFor(() => sockets[0], 'socket');
    s1.accept();
    await waitFor(() => s1.sentOf('subscribe').length > 0, 'subscribe');
    emit(s1, { type: 'subscribed', roomId: ROOM, lastSeq: 2, rev: 2, replayed: 0, resync: false });
    await waitFor(() => room.getState().status === 'live', 'first page');
    // The list follows the same room (it knows no cursor of its own): its subscribe resumes from the room's.
    const releaseList = client.chat.rooms.roomList().retain();
    await waitFor(() => s1.sentOf('subscribe').length === 2, 'the list follows the room');
    expect(s1.sentOf('subscribe')[1]).toEqual({ type: 'subscribe', roomId: ROOM, sinceSeq: 2, sinceRev: 2 });
    emit(s1, { type: 'subscribed', roomId: ROOM, lastSeq: 2, rev: 2, replayed: 0, resync: false });
    emit(s1, { type: 'new_message', roomId: ROOM, rev: 3, message: rm(3) });

    s1.serverClose(1006);
    const s2 = await waitFor(() => sockets[1], 'reconnect');
    s2.accept();
    await waitFor(() => s2.sentOf('subscribe').length > 0, 'resubscribe');
    expect(s2.sentOf('subscribe')[0]).toEqual({ type: 'subscribe', roomId: ROOM, sinceSeq: 3, sinceRev: 3 });
    releaseList();
    releaseRoom();
  });
});
