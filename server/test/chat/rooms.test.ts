// Rooms and direct messages (§6.1) on two instances sharing PostgreSQL and Redis: the routes and their bad input,
// membership on every path (routes, subscribe, send, edit, delete, typing, read), contiguous seqs under concurrent
// senders on both instances, resume with replay of edits and deletions, live removal, receipts, and notifications
// from chat with their fold.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, requestAs, type TestUser } from '../helpers/users.js';
import { type ChatClient, type ChatEvent, chatUrl, openChat } from '../helpers/ws-client.js';

const FOLD_MS = 1_500;

describe('chat rooms across two instances', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let alice: TestUser;
  let bob: TestUser;
  let carol: TestUser;
  let admin: TestUser;
  const clients: ChatClient[] = [];
  const open = async (app: App, cookie?: string) => {
    const c = await openChat(`${chatUrl(app)}?rooms=1`, { cookie });
    clients.push(c);
    return c;
  };
  const api = (app: App, user: TestUser | null, method: string, url: string, payload?: unknown) =>
    requestAs(app, user, method as 'GET', url, payload);
  const createRoom = async (owner: TestUser, kind: 'public' | 'private', memberIds: string[] = []) => {
    const res = await api(a, owner, 'POST', '/chat/rooms', {
      name: `room ${randomUUID().slice(0, 6)}`,
      kind,
      memberIds,
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().room as { id: string; kind: string; lastSeq: number };
  };
  const subscribe = async (c: ChatClient, roomId: string, extra: Record<string, unknown> = {}) => {
    c.send({ type: 'subscribe', roomId, ...extra });
    return c.next('subscribed', (e) => e.roomId === roomId);
  };
  const send = async (c: ChatClient, roomId: string, message: string) => {
    const clientMessageId = randomUUID();
    c.send({ type: 'send_message', roomId, message, clientMessageId });
    return c.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
  };

  beforeAll(async () => {
    env = await createTestEnv({
      CHAT_THROTTLE_LIMIT: '1000',
      CHAT_FRAME_LIMIT: '1000',
      PRESENCE_DEBOUNCE_MS: '30',
      HEARTBEAT_INTERVAL_MS: '250',
      CHAT_NOTIFY_FOLD_MS: String(FOLD_MS),
      CHAT_ROOM_CREATES_PER_HOUR: '100',
    });
    a = await env.app({ INSTANCE_ID: 'rooms-a' });
    b = await env.app({ INSTANCE_ID: 'rooms-b' });
    await Promise.all([a.listen({ port: 0, host: '127.0.0.1' }), b.listen({ port: 0, host: '127.0.0.1' })]);
    [alice, bob, carol, admin] = await Promise.all([
      createVerifiedUser(a, env.smtp, { name: 'Alice', username: 'alice_r' }),
      createVerifiedUser(a, env.smtp, { name: 'Bob', username: 'bob_r' }),
      createVerifiedUser(a, env.smtp, { name: 'Carol', username: 'carol_r' }),
      createAdmin(a, env.smtp),
    ]);
  });
  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await env.close();
  });

  describe('routes', () => {
    it('creates rooms, lists mine with general first-class, and hides private rooms from non-members', async () => {
      const room = await createRoom(alice, 'private', [bob.id]);
      expect(room).toMatchObject({
        kind: 'private',
        lastSeq: 0,
        role: 'owner',
        unreadCount: 0,
        memberCount: 2,
      });
      const mine = (await api(b, bob, 'GET', '/chat/rooms')).json().rooms as Array<{
        id: string;
        role: string;
      }>;
      expect(mine.map((r) => r.id)).toEqual(expect.arrayContaining([room.id, 'general']));
      expect(mine.find((r) => r.id === room.id)?.role).toBe('member');
      const detail = await api(b, bob, 'GET', `/chat/rooms/${room.id}`);
      expect(detail.statusCode).toBe(200);
      expect(
        detail
          .json()
          .members.map((m: { userId: string }) => m.userId)
          .sort(),
      ).toEqual([alice.id, bob.id].sort());
      // Carol is not a member: every path answers exactly as for a room that does not exist.
      const missing = randomUUID();
      for (const id of [room.id, missing]) {
        for (const [method, url, body] of [
          ['GET', `/chat/rooms/${id}`],
          ['GET', `/chat/rooms/${id}/messages`],
          ['POST', `/chat/rooms/${id}/join`],
          ['POST', `/chat/rooms/${id}/read`, { seq: 1 }],
          ['POST', `/chat/rooms/${id}/members`, { userIds: [carol.id] }],
          ['DELETE', `/chat/rooms/${id}/members/${bob.id}`],
        ] as const) {
          const res = await api(a, carol, method, url, body);
          expect(res.statusCode, `${method} ${url}`).toBe(404);
          expect(res.json()).toEqual({ code: 'NOT_FOUND', message: 'Room not found' });
        }
      }
      expect(
        (await api(a, carol, 'GET', '/chat/rooms')).json().rooms.map((r: { id: string }) => r.id),
      ).not.toContain(room.id);
    });

    it('lets anyone join a public room, lists it as public, and counts unread messages per member', async () => {
      const room = await createRoom(alice, 'public');
      const pub = (await api(a, carol, 'GET', '/chat/rooms?scope=public')).json().rooms as Array<{
        id: string;
      }>;
      expect(pub.map((r) => r.id)).toContain(room.id);
      const joined = await api(b, carol, 'POST', `/chat/rooms/${room.id}/join`);
      expect(joined.statusCode).toBe(200);
      expect(joined.json().room).toMatchObject({ role: 'member', memberCount: 2 });
      const s = await open(a, alice.cookie);
      await send(s, room.id, 'one');
      await send(s, room.id, 'two');
      const carolRooms = (await api(a, carol, 'GET', '/chat/rooms')).json().rooms as Array<
        Record<string, unknown>
      >;
      // Most recent activity first, with the unread count of carol (alice's own messages never count for alice).
      expect(carolRooms[0]).toMatchObject({ id: room.id, lastSeq: 2, lastReadSeq: 0, unreadCount: 2 });
      const read = await api(a, carol, 'POST', `/chat/rooms/${room.id}/read`, { seq: 1 });
      expect(read.json()).toEqual({ lastReadSeq: 1, unreadCount: 1 });
      expect((await api(a, carol, 'POST', `/chat/rooms/${room.id}/read`, { seq: 0 })).json()).toEqual({
        lastReadSeq: 1,
        unreadCount: 1,
      });
      expect((await api(a, carol, 'POST', `/chat/rooms/${room.id}/read`, { seq: 99 })).json()).toEqual({
        lastReadSeq: 2,
        unreadCount: 0,
      });
      const aliceRoom = (await api(a, alice, 'GET', `/chat/rooms/${room.id}`)).json().room;
      expect(aliceRoom.unreadCount).toBe(0);
    });

    it('pages a room by seq with hasMore in both directions', async () => {
      const room = await createRoom(alice, 'private');
      const s = await open(a, alice.cookie);
      for (let i = 1; i <= 5; i++) await send(s, room.id, `p${i}`);
      const last = await api(a, alice, 'GET', `/chat/rooms/${room.id}/messages?limit=2`);
      expect(last.json().messages.map((m: { seq: number }) => m.seq)).toEqual([4, 5]);
      expect(last.json().hasMore).toBe(true);
      const older = (await api(a, alice, 'GET', `/chat/rooms/${room.id}/messages?before=4&limit=10`)).json();
      expect(older.messages.map((m: { message: string }) => m.message)).toEqual(['p1', 'p2', 'p3']);
      expect(older.hasMore).toBe(false);
      const newer = (await api(b, alice, 'GET', `/chat/rooms/${room.id}/messages?after=2&limit=2`)).json();
      expect(newer.messages.map((m: { seq: number }) => m.seq)).toEqual([3, 4]);
      expect(newer.hasMore).toBe(true);
      expect(newer.messages[0]).toMatchObject({ roomId: room.id, userId: alice.id, seq: 3 });
    });

    it('gives one direct room per pair, from either side and under concurrent first requests', async () => {
      const x = await createVerifiedUser(a, env.smtp, { name: 'Xavier' });
      const y = await createVerifiedUser(a, env.smtp, { name: 'Yvonne' });
      const both = await Promise.all([
        api(a, x, 'POST', '/chat/direct', { userId: y.id }),
        api(b, y, 'POST', '/chat/direct', { userId: x.id }),
        api(b, x, 'POST', '/chat/direct', { userId: y.id }),
      ]);
      const ids = new Set(both.map((r) => r.json().room.id));
      expect(ids.size).toBe(1);
      expect(both.map((r) => r.statusCode).sort()).toEqual([200, 200, 201]);
      const again = await api(a, y, 'POST', '/chat/direct', { userId: x.id });
      expect(again.statusCode).toBe(200);
      // Named after the other member, for each side.
      expect(again.json().room).toMatchObject({ kind: 'direct', name: 'Xavier', memberCount: 2 });
      expect(both[0]?.json().room.name).toBe('Yvonne');
    });

    it('answers bad input with 4xx in the contract shape, never 5xx', async () => {
      const room = await createRoom(alice, 'private');
      const shared = await createRoom(alice, 'private', [bob.id]);
      const cases: Array<[string, string, unknown, number, TestUser | null]> = [
        ['GET', '/chat/rooms', undefined, 401, null],
        ['POST', '/chat/direct', { userId: bob.id }, 401, null],
        ['GET', '/chat/rooms?scope=everything', undefined, 400, alice],
        ['GET', '/chat/rooms?extra=1', undefined, 400, alice],
        ['POST', '/chat/rooms', { name: '', kind: 'public' }, 400, alice],
        ['POST', '/chat/rooms', { name: 'x'.repeat(81), kind: 'public' }, 400, alice],
        ['POST', '/chat/rooms', { name: 'ok', kind: 'direct' }, 400, alice],
        ['POST', '/chat/rooms', { name: 'ok', kind: 'public', extra: 1 }, 400, alice],
        ['POST', '/chat/rooms', { name: 'ok\u0000', kind: 'public' }, 400, alice],
        // Issue 22 (8): a room name is shown to others like a user's name: one line, nothing invisible.
        ['POST', '/chat/rooms', { name: 'Release\nplanning', kind: 'public' }, 400, alice],
        ['POST', '/chat/rooms', { name: 'Ann\u202egnp.exe', kind: 'public' }, 400, alice],
        ['POST', '/chat/rooms', { name: 'general\u200b', kind: 'public' }, 400, alice],
        ['POST', '/chat/rooms', { name: 'a\u2066b\u2069', kind: 'private' }, 400, alice],
        ['POST', '/chat/rooms', { name: 'ok', kind: 'private', memberIds: Array(101).fill('u') }, 400, alice],
        ['POST', '/chat/rooms', { name: 'ok', kind: 'private', memberIds: ['no-such-user'] }, 404, alice],
        ['GET', '/chat/rooms/not-a-room', undefined, 400, alice],
        ['GET', `/chat/rooms/${room.id}/messages?before=1&after=1`, undefined, 400, alice],
        ['GET', `/chat/rooms/${room.id}/messages?limit=0`, undefined, 400, alice],
        ['GET', `/chat/rooms/${room.id}/messages?limit=101`, undefined, 400, alice],
        ['GET', `/chat/rooms/${room.id}/messages?before=-1`, undefined, 400, alice],
        ['POST', `/chat/rooms/${room.id}/read`, { seq: -1 }, 400, alice],
        ['POST', `/chat/rooms/${room.id}/read`, { seq: 'x' }, 400, alice],
        ['POST', `/chat/rooms/${room.id}/read`, {}, 400, alice],
        ['POST', `/chat/rooms/${room.id}/members`, { userIds: [] }, 400, alice],
        ['POST', `/chat/rooms/${room.id}/members`, { userIds: ['no-such-user'] }, 404, alice],
        ['POST', `/chat/rooms/${shared.id}/members`, { userIds: [carol.id] }, 403, bob],
        ['DELETE', `/chat/rooms/${room.id}/members/${carol.id}`, undefined, 404, alice],
        ['POST', '/chat/direct', { userId: alice.id }, 400, alice],
        ['POST', '/chat/direct', { userId: 'no-such-user' }, 404, alice],
        ['POST', '/chat/direct', {}, 400, alice],
        ['POST', '/chat/rooms/general/members', { userIds: [bob.id] }, 403, admin],
        ['DELETE', `/chat/rooms/general/members/${alice.id}`, undefined, 403, alice],
      ];
      for (const [method, url, body, status, user] of cases) {
        const res = await api(a, user, method, url, body);
        expect(res.statusCode, `${method} ${url} ${JSON.stringify(body)}: ${res.body}`).toBe(status);
        expect(typeof res.json().code).toBe('string');
      }
    });

    it('enforces the limits with clear codes: members per private room, rooms per user, creations per hour', async () => {
      // An instance of its own with small limits (the same database and store).
      const c = await env.app({
        INSTANCE_ID: 'rooms-c',
        CHAT_MAX_ROOMS_PER_USER: '4',
        CHAT_MAX_PRIVATE_ROOM_MEMBERS: '3',
        CHAT_ROOM_CREATES_PER_HOUR: '6',
      });
      const owner = await createVerifiedUser(c, env.smtp, { name: 'Limited' });
      const others = await Promise.all(
        [1, 2, 3].map((i) => createVerifiedUser(c, env.smtp, { name: `L${i}` })),
      );
      const post = (body: Record<string, unknown>) => api(c, owner, 'POST', '/chat/rooms', body);
      const full = await post({ name: 'too big', kind: 'private', memberIds: others.map((o) => o.id) });
      expect(full.statusCode).toBe(409);
      expect(full.json().code).toBe('ROOM_FULL');
      const small = await post({ name: 'small', kind: 'private', memberIds: [others[0]?.id] });
      expect(small.statusCode).toBe(201);
      const roomId = small.json().room.id;
      const add = await api(c, owner, 'POST', `/chat/rooms/${roomId}/members`, {
        userIds: [others[1]?.id, others[2]?.id],
      });
      expect(add.json().code).toBe('ROOM_FULL');
      // Rooms per user (4): owner is in 1; 3 more fit, the next is refused.
      for (let i = 0; i < 3; i++)
        expect((await post({ name: `r${i}`, kind: 'public' })).statusCode).toBe(201);
      const over = await post({ name: 'one too many', kind: 'public' });
      expect(over.statusCode).toBe(409);
      expect(over.json().code).toBe('ROOM_LIMIT');
      // Creations per hour (6, refusals counted too): 6 so far, so the next is rate limited.
      const rate = await post({ name: 'seven', kind: 'public' });
      expect(rate.statusCode).toBe(429);
      expect(rate.json().code).toBe('RATE_LIMITED');
      expect(Number(rate.headers['retry-after'])).toBeGreaterThan(0);
    });
  });

  describe('socket', () => {
    it('enforces membership on subscribe, send, edit, delete, typing and mark_read', async () => {
      const room = await createRoom(alice, 'private', [bob.id]);
      const owner = await open(a, alice.cookie);
      await subscribe(owner, room.id);
      const stored = await send(owner, room.id, 'secret');
      const outsider = await open(b, carol.cookie);
      const notFound = async (frame: Record<string, unknown>) => {
        outsider.send(frame);
        const e = await outsider.next('error');
        expect(e, JSON.stringify(frame)).toMatchObject({ code: 'NOT_FOUND' });
      };
      await notFound({ type: 'subscribe', roomId: room.id });
      await notFound({ type: 'subscribe', roomId: randomUUID() });
      await notFound({ type: 'send_message', roomId: room.id, message: 'let me in' });
      await notFound({ type: 'edit_message', roomId: room.id, messageId: stored.message.id, message: 'x' });
      await notFound({ type: 'delete_message', roomId: room.id, messageId: stored.message.id });
      await notFound({ type: 'typing', roomId: room.id, isTyping: true });
      await notFound({ type: 'mark_read', roomId: room.id, seq: 1 });
      // A guest reads general only.
      const guest = await open(b);
      guest.send({ type: 'subscribe', roomId: room.id });
      expect(await guest.next('error')).toMatchObject({ code: 'NOT_FOUND', roomId: room.id });
      expect(outsider.log.some((e) => e.type === 'new_message' && e.roomId === room.id)).toBe(false);
    });

    it('a socket that subscribes to a room again (a second view of it) keeps receiving it, from both instances', async () => {
      // The only subscriber on its instance re-registering must not leave the room's pipe (and its bus topic).
      const room = await createRoom(alice, 'private', [bob.id]);
      const sa = await open(a, alice.cookie);
      const sb = await open(b, bob.cookie);
      await subscribe(sa, room.id);
      await subscribe(sa, room.id);
      await subscribe(sb, room.id);
      const fromB = await send(sb, room.id, 'after the second subscribe');
      const seen = await sa.next('new_message', (e) => e.roomId === room.id);
      expect(seen.message.id).toBe(fromB.message.id);
      const own = await send(sa, room.id, 'and my own');
      expect(own.message.seq).toBe(fromB.message.seq + 1);
      expect((await sb.next('new_message', (e) => e.message.id === own.message.id)).roomId).toBe(room.id);
      // Its presence still counts Alice once.
      sa.send({ type: 'unsubscribe', roomId: room.id });
      await sa.next('unsubscribed', (e) => e.roomId === room.id);
      const late = await send(sb, room.id, 'after unsubscribing');
      await new Promise((r) => setTimeout(r, 200));
      expect(sa.log.some((e) => e.type === 'new_message' && e.message.id === late.message.id)).toBe(false);
      // Within the per-user socket limit of the tests that follow.
      await Promise.all([sa.close(), sb.close()]);
    });

    it('answers bad frames with error and keeps the socket open', async () => {
      const s = await open(a, alice.cookie);
      for (const frame of [
        { type: 'subscribe' },
        { type: 'subscribe', roomId: 'nope' },
        { type: 'subscribe', roomId: 'general', sinceSeq: -1 },
        { type: 'subscribe', roomId: 'general', sinceSeq: 1.5 },
        { type: 'subscribe', roomId: 'general', extra: true },
        { type: 'unsubscribe' },
        { type: 'mark_read', roomId: 'general' },
        { type: 'mark_read', roomId: 'general', seq: '3' },
        { type: 'send_message', roomId: 42, message: 'x' },
        { type: 'typing', roomId: 'general' },
      ]) {
        s.send(frame);
        const e = await s.next('error');
        expect(e.code, JSON.stringify(frame)).toBe('VALIDATION_ERROR');
      }
      s.send({ type: 'ping' });
      await s.next('pong');
    });

    it('numbers concurrent senders on both instances contiguously, each message once and in order everywhere', async () => {
      const room = await createRoom(alice, 'private', [bob.id]);
      const sa = await open(a, alice.cookie);
      const sb = await open(b, bob.cookie);
      const watchA = await open(a, bob.cookie);
      const watchB = await open(b, alice.cookie);
      await Promise.all([sa, sb, watchA, watchB].map((c) => subscribe(c, room.id)));
      // Below the per-socket limit of requests waiting for the database (16).
      const N = 12;
      for (let i = 0; i < N; i++) {
        sa.send({ type: 'send_message', roomId: room.id, message: `a${i}` });
        sb.send({ type: 'send_message', roomId: room.id, message: `b${i}` });
      }
      for (const w of [watchA, watchB]) {
        const seqs: number[] = [];
        for (let i = 0; i < 2 * N; i++)
          seqs.push((await w.next('new_message', (e) => e.roomId === room.id)).message.seq);
        expect(seqs).toEqual(Array.from({ length: 2 * N }, (_, i) => i + 1));
      }
      const all = (await api(a, alice, 'GET', `/chat/rooms/${room.id}/messages?limit=100`)).json().messages;
      expect(all.map((m: { seq: number }) => m.seq)).toEqual(Array.from({ length: 2 * N }, (_, i) => i + 1));
      expect(new Set(all.map((m: { message: string }) => m.message)).size).toBe(2 * N);
      // Nothing more arrives (no duplicates): a last message is the next frame of the room.
      await send(sa, room.id, 'last');
      const next = await watchB.next('new_message', (e) => e.roomId === room.id);
      expect(next.message).toMatchObject({ message: 'last', seq: 2 * N + 1 });
    });

    it('resumes after a reconnect: messages, edits and deletions after sinceSeq in order, then live frames', async () => {
      const room = await createRoom(alice, 'private', [bob.id]);
      const writer = await open(a, alice.cookie);
      await subscribe(writer, room.id);
      const first = await send(writer, room.id, 'first');
      const reader = await open(b, bob.cookie);
      const sub = await subscribe(reader, room.id);
      expect(sub).toMatchObject({ lastSeq: 1, replayed: 0, resync: false });
      await reader.close();
      const second = await send(writer, room.id, 'second');
      await send(writer, room.id, 'third');
      writer.send({
        type: 'edit_message',
        roomId: room.id,
        messageId: first.message.id,
        message: 'first (edited)',
      });
      await writer.next('message_updated');
      writer.send({ type: 'delete_message', roomId: room.id, messageId: second.message.id });
      await writer.next('message_deleted');
      const back = await open(b, bob.cookie);
      const resumed = await subscribe(back, room.id, { sinceSeq: 1 });
      expect(resumed).toMatchObject({ lastSeq: 3, resync: false });
      await send(writer, room.id, 'live');
      await back.next('new_message', (e) => e.message.message === 'live');
      const roomFrames = back.log.filter((e) => e.roomId === room.id && e.type !== 'presence');
      expect(roomFrames.map((e) => [e.type, e.message?.seq ?? e.seq])).toEqual([
        ['subscribed', undefined],
        // The creation of seq 2 is gone (deleted since): its deletion says so.
        ['new_message', 3],
        ['message_updated', 1],
        ['message_deleted', 2],
        ['new_message', 4],
      ]);
      expect(roomFrames[2]?.message.message).toBe('first (edited)');
      // A cursor beyond the room's end cannot be honoured: resync.
      const odd = await open(a, bob.cookie);
      expect(await subscribe(odd, room.id, { sinceSeq: 99 })).toMatchObject({
        resync: true,
        replayed: 0,
        lastSeq: 4,
      });
    });

    it('stops a removed member on every instance before the removal returns', async () => {
      const room = await createRoom(alice, 'private', [bob.id, carol.id]);
      const carolA = await open(a, carol.cookie);
      const carolB = await open(b, carol.cookie);
      const bobB = await open(b, bob.cookie);
      await Promise.all([carolA, carolB, bobB].map((c) => subscribe(c, room.id)));
      const res = await api(a, alice, 'DELETE', `/chat/rooms/${room.id}/members/${carol.id}`);
      expect(res.json()).toEqual({ roomId: room.id, userId: carol.id });
      const writer = await open(a, alice.cookie);
      await send(writer, room.id, 'after the removal');
      await bobB.next('new_message', (e) => e.message.message === 'after the removal');
      await carolA.next('unsubscribed', (e) => e.roomId === room.id && e.reason === 'removed');
      await carolB.next('unsubscribed', (e) => e.roomId === room.id && e.reason === 'removed');
      for (const c of [carolA, carolB]) {
        expect(c.log.some((e) => e.type === 'new_message' && e.message.message === 'after the removal')).toBe(
          false,
        );
      }
      carolB.send({ type: 'send_message', roomId: room.id, message: 'still here?' });
      expect(await carolB.next('error')).toMatchObject({ code: 'NOT_FOUND' });
      carolB.send({ type: 'subscribe', roomId: room.id });
      expect(await carolB.next('error')).toMatchObject({ code: 'NOT_FOUND' });
    });

    it('sends read receipts to the other members of a direct room, and counts presence per room', async () => {
      const dm = (await api(a, alice, 'POST', '/chat/direct', { userId: bob.id })).json().room as {
        id: string;
      };
      const sa = await open(a, alice.cookie);
      const sb = await open(b, bob.cookie);
      await subscribe(sa, dm.id);
      await subscribe(sb, dm.id);
      await sa.next('presence', (e) => e.roomId === dm.id && e.online === 2);
      const m = await send(sa, dm.id, 'hello bob');
      await sb.next('new_message', (e) => e.message.id === m.message.id);
      sb.send({ type: 'mark_read', roomId: dm.id, seq: m.message.seq });
      expect(await sa.next('read', (e) => e.roomId === dm.id)).toEqual({
        type: 'read',
        roomId: dm.id,
        userId: bob.id,
        seq: m.message.seq,
      });
      const bobRoom = (await api(b, bob, 'GET', `/chat/rooms/${dm.id}`)).json();
      expect(bobRoom.room).toMatchObject({ lastReadSeq: m.message.seq, unreadCount: 0 });
      expect(bobRoom.members.find((x: { userId: string }) => x.userId === bob.id).lastReadSeq).toBe(
        m.message.seq,
      );
      sb.send({ type: 'typing', roomId: dm.id, isTyping: true });
      expect(await sa.next('typing', (e) => e.roomId === dm.id)).toMatchObject({
        userId: bob.id,
        isTyping: true,
      });
      await sb.close();
      await sa.next('presence', (e) => e.roomId === dm.id && e.online === 1);
    });

    it('keeps §6 sockets unchanged: no roomId or seq on general, nothing of other rooms', async () => {
      const legacy = await openChat(a, { cookie: bob.cookie });
      clients.push(legacy);
      const room = await createRoom(alice, 'public');
      const s = await open(b, alice.cookie);
      await send(s, room.id, 'elsewhere');
      const clientMessageId = randomUUID();
      s.send({ type: 'send_message', message: 'in general', clientMessageId });
      const got = await legacy.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
      expect(Object.keys(got).sort()).toEqual(['message', 'type']);
      expect(got.message.seq).toBeUndefined();
      expect(legacy.log.some((e) => e.type === 'new_message' && e.message.message === 'elsewhere')).toBe(
        false,
      );
      // The room-aware socket saw the same message with roomId and seq.
      const v2 = await s.next('new_message', (e) => e.message.clientMessageId === clientMessageId);
      expect(v2).toMatchObject({ roomId: 'general', message: { roomId: 'general' } });
      expect(v2.message.seq).toBeGreaterThan(0);
    });
  });

  describe('notifications from chat', () => {
    it('notifies a direct message to a recipient not in the room, once per fold window, with a link', async () => {
      const u = await createVerifiedUser(a, env.smtp, { name: 'Dee' });
      const dm = (await api(a, alice, 'POST', '/chat/direct', { userId: u.id })).json().room as {
        id: string;
      };
      const s = await open(a, alice.cookie);
      const list = async () =>
        (await api(b, u, 'GET', '/notification/list')).json().notifications as ChatEvent[];
      const first = await send(s, dm.id, 'are you there?');
      await expect.poll(async () => (await list()).length, { timeout: 5_000 }).toBe(1);
      const [n] = await list();
      expect(n).toMatchObject({
        type: 'message',
        content: 'are you there?',
        metadata: {
          data: { roomId: dm.id, seq: first.message.seq },
          actions: [{ type: 'link', url: `/chat?room=${dm.id}` }],
        },
      });
      await send(s, dm.id, 'hello?');
      // Folded: the second message inside the window adds nothing (the next, after it, does).
      await new Promise((r) => setTimeout(r, FOLD_MS + 200));
      expect(await list()).toHaveLength(1);
      await send(s, dm.id, 'ping after the window');
      await expect.poll(async () => (await list()).length, { timeout: 5_000 }).toBe(2);
      // Subscribed to the room: no notification.
      const uSocket = await open(b, u.cookie);
      await subscribe(uSocket, dm.id);
      await new Promise((r) => setTimeout(r, FOLD_MS + 200));
      await send(s, dm.id, 'you are here');
      await uSocket.next('new_message', (e) => e.message.message === 'you are here');
      await new Promise((r) => setTimeout(r, 300));
      expect(await list()).toHaveLength(2);
    });

    it('notifies a direct message with lone surrogates: stored and listed with U+FFFD', async () => {
      const u = await createVerifiedUser(a, env.smtp, { name: 'Lone' });
      const dm = (await api(a, alice, 'POST', '/chat/direct', { userId: u.id })).json().room as {
        id: string;
      };
      // Closed at the end: alice's sockets count against the per-user connection limit of later tests.
      const s = await openChat(`${chatUrl(a)}?rooms=1`, { cookie: alice.cookie });
      try {
        await send(s, dm.id, 'half \ud83d of an emoji \udfff');
      } finally {
        await s.close();
      }
      const list = async () =>
        (await api(b, u, 'GET', '/notification/list')).json().notifications as ChatEvent[];
      await expect.poll(async () => (await list()).length, { timeout: 5_000 }).toBe(1);
      expect((await list())[0]).toMatchObject({
        type: 'message',
        content: 'half \ufffd of an emoji \ufffd',
        metadata: { data: { roomId: dm.id } },
      });
      const history = (await api(a, alice, 'GET', `/chat/rooms/${dm.id}/messages`)).json()
        .messages as ChatEvent[];
      expect(history.map((m) => m.message)).toEqual(['half \ufffd of an emoji \ufffd']);
    });

    it('notifies an @mention of a room member, not of a non-member', async () => {
      const room = await createRoom(alice, 'private', [bob.id]);
      const s = await open(a, alice.cookie);
      const before = (await api(a, carol, 'GET', '/notification/list')).json().notifications.length;
      const m = await send(s, room.id, 'hey @bob_r and @carol_r, look');
      const bobList = async () =>
        ((await api(a, bob, 'GET', '/notification/list')).json().notifications as ChatEvent[]).filter(
          (n) => n.type === 'mention' && n.metadata.data.roomId === room.id,
        );
      await expect.poll(async () => (await bobList()).length, { timeout: 5_000 }).toBe(1);
      expect((await bobList())[0]).toMatchObject({ metadata: { data: { seq: m.message.seq } } });
      expect((await bobList())[0]?.title).toContain('Alice');
      expect((await api(a, carol, 'GET', '/notification/list')).json().notifications.length).toBe(before);
    });
  });

  it('purges a user in every room, replayable as deletions', async () => {
    const victim = await createVerifiedUser(a, env.smtp, { name: 'Victim' });
    const room = await createRoom(victim, 'private', [bob.id]);
    const v = await open(a, victim.cookie);
    await send(v, room.id, 'bad 1');
    await send(v, 'general', 'bad 2');
    const watcher = await open(b, bob.cookie);
    await subscribe(watcher, room.id);
    const res = await api(a, admin, 'DELETE', `/admin/users/${victim.id}/messages`);
    expect(res.json()).toEqual({ deletedCount: 2 });
    await watcher.next('message_deleted', (e) => e.roomId === room.id && e.seq === 1);
    const left = (await api(a, bob, 'GET', `/chat/rooms/${room.id}/messages`)).json().messages;
    expect(left).toEqual([]);
  });
});
