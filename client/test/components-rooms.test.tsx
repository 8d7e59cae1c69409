// @vitest-environment happy-dom
// RoomList and ChatRoom on rooms other than `general`, rendered for real (react-dom in a DOM implementation) over
// the SDK, with a fake server (fakes.ts, plus the room routes here): accessible names, what each control sends
// (HTTP calls and socket frames), live unread badges, read marks and receipts, starting a direct conversation.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatServerEvent, ChatRoom as Room, RoomMessage } from '../src/contract.js';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import { ChatRoom, HeraldProvider, NotificationBell, RoomList } from '../src/react.js';
import { FakeEnvironment, FakeHerald, FakeSocket, notification } from './fakes.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const DM = '6f1c2a4e-8b0d-4c6e-9a51-3d2f7e8b9c10';
const TEAM = '7a2d3b5f-9c1e-4d7f-8b62-4e3a8f9c0d21';
const OPEN = '8b3e4c6a-0d2f-4e8a-9c73-5f4b9a0d1e32';
const NEW = '9c4f5d7b-1e3a-4f9b-8d84-6a5c0b1e2f43';

let root: Root | null = null;
let client: HeraldClient | null = null;

afterEach(async () => {
  await act(async () => root?.unmount());
  root = null;
  client?.close();
  client = null;
  document.body.innerHTML = '';
});

const room = (id: string, kind: Room['kind'], name: string, extra: Partial<Room> = {}): Room => ({
  id,
  kind,
  name,
  createdBy: 'u1',
  createdAt: '2026-01-01T00:00:00.000Z',
  memberCount: 2,
  lastSeq: 0,
  lastMessageAt: null,
  ...extra,
});

const message = (roomId: string, seq: number, userId: string, text: string): RoomMessage => ({
  id: `${roomId.slice(0, 4)}-${seq}`,
  roomId,
  seq,
  userId,
  userName: userId === 'u1' ? 'Ada' : 'Bob',
  userAvatar: null,
  message: text,
  createdAt: `2026-01-01T00:00:0${seq}.000Z`,
});

interface Call {
  method: string;
  path: string;
  body: unknown;
}

/** The room routes of CONTRACT §6.1 over in-memory rooms: `mine` (with my role) and `others`. */
function setup() {
  const feedServer = new FakeHerald();
  const calls: Call[] = [];
  const sockets: FakeSocket[] = [];
  const mine: Room[] = [
    room('general', 'general', 'General', {
      lastSeq: 5,
      lastMessageAt: '2026-01-01T00:00:01.000Z',
      role: 'member',
      lastReadSeq: 5,
      unreadCount: 0,
    }),
    room(DM, 'direct', 'Bob', {
      lastSeq: 2,
      lastMessageAt: '2026-01-01T00:00:02.000Z',
      role: 'member',
      lastReadSeq: 1,
      unreadCount: 1,
    }),
  ];
  const others: Room[] = [
    room(OPEN, 'public', 'Open plan', { memberCount: 3 }),
    room(TEAM, 'public', 'Team'),
  ];
  const history: Record<string, RoomMessage[]> = {
    [DM]: [message(DM, 1, 'u1', 'Hello Bob'), message(DM, 2, 'u2', 'Hi Ada')],
    [OPEN]: [message(OPEN, 1, 'u2', 'Welcome')],
  };
  let bobRead = 0;
  const openSocket = (url: string) => {
    const s = new FakeSocket(url);
    sockets.push(s);
    return s;
  };
  const json = (body: unknown, status = 200) => Response.json(body, { status });
  client = createHeraldClient({
    baseURL: 'http://herald.test',
    fetch: async (input, init = {}) => {
      const url = new URL(String(input));
      const method = init.method ?? 'GET';
      const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
      const path = url.pathname;
      calls.push({ method, path, body });
      if (path === '/auth/get-session') {
        return json({
          session: { id: 's1', userId: 'u1', expiresAt: '2099-01-01T00:00:00.000Z' },
          user: { id: 'u1', email: 'ada@example.test', name: 'Ada', emailVerified: true },
        });
      }
      if (path === '/chat/rooms' && method === 'GET')
        return json({ rooms: url.searchParams.get('scope') === 'public' ? [...others, mine[2]] : mine });
      if (path === '/chat/rooms' && method === 'POST') {
        const created = room(NEW, body.kind, body.name, {
          memberCount: 1,
          role: 'owner',
          lastReadSeq: 0,
          unreadCount: 0,
          createdAt: '2026-01-02T00:00:00.000Z',
        });
        mine.unshift(created);
        return json({ room: created }, 201);
      }
      if (path === '/chat/direct') {
        const existing = mine.find((r) => r.id === DM) as Room;
        return json({ room: existing });
      }
      const m = /^\/chat\/rooms\/([^/]+)(\/[a-z]+)?$/.exec(path);
      const id = m?.[1] ?? '';
      if (m?.[2] === '/join') {
        const i = others.findIndex((r) => r.id === id);
        const joined = { ...(others[i] as Room), role: 'member' as const, lastReadSeq: 0, unreadCount: 0 };
        others.splice(i, 1);
        mine.push(joined);
        return json({ room: joined });
      }
      if (m?.[2] === '/messages') return json({ messages: history[id] ?? [], hasMore: false });
      if (m && !m[2]) {
        const r = mine.find((x) => x.id === id) ?? others.find((x) => x.id === id);
        if (!r) return json({ code: 'NOT_FOUND', message: 'Room not found' }, 404);
        const members =
          r.kind === 'direct'
            ? [
                { userId: 'u1', name: 'Ada', role: 'member', lastReadSeq: 2 },
                { userId: 'u2', name: 'Bob', role: 'member', lastReadSeq: bobRead },
              ]
            : [];
        return json({ room: r, members });
      }
      return feedServer.fetch(input, init);
    },
    WebSocket: openSocket,
    locks: null,
    BroadcastChannel: null,
    environment: new FakeEnvironment(),
    random: () => 0.5,
    feed: { baseDelayMs: 5, maxDelayMs: 20, healthyAfterMs: 0 },
  });
  return {
    c: client,
    calls,
    sockets,
    mine,
    feedServer,
    setBobRead: (seq: number) => {
      bobRead = seq;
    },
  };
}

async function mount(c: HeraldClient, children: React.ReactNode) {
  const container = document.createElement('div');
  document.body.appendChild(container);
  root = createRoot(container);
  await act(async () => {
    root?.render(<HeraldProvider client={c}>{children}</HeraldProvider>);
  });
  return container;
}

async function until<T>(check: () => T | undefined | null | false, what: string): Promise<T> {
  for (let i = 0; i < 1000; i++) {
    const v = check();
    if (v) return v;
    await act(() => new Promise((r) => setTimeout(r, 10)));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A button by its accessible name (aria-label, else its text). */
const button = (el: ParentNode, name: string | RegExp): HTMLButtonElement | undefined =>
  [...el.querySelectorAll('button')].find((b) => {
    const label = b.getAttribute('aria-label') ?? b.textContent ?? '';
    return typeof name === 'string' ? label === name : name.test(label);
  });

/** The control a wrapping <label> names by its <span> (or a <label for>), as getByLabel finds it. */
function byLabel(el: ParentNode, text: string): HTMLInputElement | HTMLSelectElement | undefined {
  for (const label of el.querySelectorAll('label')) {
    const own = label.htmlFor ? label.textContent : label.querySelector('span')?.textContent;
    if ((own ?? '').trim() !== text) continue;
    if (label.htmlFor) return document.getElementById(label.htmlFor) as HTMLInputElement;
    return label.querySelector<HTMLInputElement>('input, select') ?? undefined;
  }
  return undefined;
}

async function click(target: HTMLElement | undefined) {
  if (!target) throw new Error('nothing to click');
  await act(async () => target.click());
}

async function type(input: HTMLInputElement | HTMLSelectElement | undefined, value: string) {
  if (!input) throw new Error('no input');
  await act(async () => {
    const proto =
      input instanceof HTMLSelectElement ? HTMLSelectElement.prototype : HTMLInputElement.prototype;
    Object.getOwnPropertyDescriptor(proto, 'value')?.set?.call(input, value);
    input.dispatchEvent(
      new Event(input instanceof HTMLSelectElement ? 'change' : 'input', { bubbles: true }),
    );
  });
}

/** The member socket once the session is known, accepted (the rooms then subscribe on it). */
async function memberSocket(c: HeraldClient, sockets: FakeSocket[]): Promise<FakeSocket> {
  await until(() => c.auth.useSession.get().data !== null, 'session');
  await act(() => new Promise((r) => setTimeout(r, 50)));
  const s = await until(() => sockets.find((x) => x.closedByClient === null), 'member socket');
  await act(async () => s.accept({ userId: 'u1', role: 'member' }, []));
  return s;
}

const subscribed = (roomId: string, lastSeq: number) =>
  ({ type: 'subscribed', roomId, lastSeq, rev: lastSeq, replayed: 0, resync: false }) as ChatServerEvent;

const roomNames = (el: ParentNode) =>
  [...el.querySelectorAll('.herald-room-list:not([aria-label]) button')].map((b) =>
    b.getAttribute('aria-label'),
  );

describe('RoomList', () => {
  it('lists my rooms with unread badges, counts live messages, selects, creates and joins rooms', async () => {
    const { c, calls, sockets } = setup();
    const selected: string[] = [];
    const el = await mount(c, <RoomList selectedRoomId="general" onSelectRoom={(id) => selected.push(id)} />);
    const s = await memberSocket(c, sockets);
    await until(() => roomNames(el).length === 2, 'rooms');
    expect(el.querySelector('h2')?.textContent).toBe('Rooms');
    expect(roomNames(el)).toEqual(['General', 'Bob, 1 unread']);
    expect(button(el, 'General')?.getAttribute('aria-current')).toBe('true');
    expect(button(el, 'Bob, 1 unread')?.querySelector('.herald-badge')?.textContent).toBe('1');
    // The list follows its rooms on the socket: a message from Bob counts, most recent activity first.
    await until(() => s.sentOf('subscribe').some((f) => f.roomId === DM), 'follows the direct room');
    await act(async () => s.emit(subscribed(DM, 2)));
    await act(async () =>
      s.emit({
        type: 'new_message',
        roomId: DM,
        rev: 3,
        message: { ...message(DM, 3, 'u2', 'Still there?'), createdAt: '2026-01-01T00:00:09.000Z' },
      } as unknown as ChatServerEvent),
    );
    await until(() => button(el, 'Bob, 2 unread'), 'two unread');
    await click(button(el, 'Bob, 2 unread'));
    expect(selected).toEqual([DM]);
    // My read (from any device) clears the badge.
    await act(async () => s.emit({ type: 'read', roomId: DM, userId: 'u1', seq: 3 } as ChatServerEvent));
    await until(() => button(el, 'Bob'), 'read');

    // Create a private room: the form posts name and kind, the list reloads and the new room is selected.
    await click(button(el, 'New room'));
    expect(button(el, 'New room')?.getAttribute('aria-expanded')).toBe('true');
    await type(byLabel(el, 'Room name'), '  Design  ');
    await type(byLabel(el, 'Visibility'), 'private');
    await act(async () => button(el, 'Create room')?.closest('form')?.requestSubmit());
    await until(() => selected.includes(NEW), 'created room selected');
    expect(calls.find((x) => x.method === 'POST' && x.path === '/chat/rooms')?.body).toEqual({
      name: 'Design',
      kind: 'private',
    });
    await until(() => roomNames(el).includes('Design'), 'new room listed');
    expect(byLabel(el, 'Room name')).toBeUndefined();

    // Public rooms lists those I am not in; Join joins and selects.
    await click(button(el, 'Public rooms'));
    await until(() => button(el, 'Join Team'), 'public rooms');
    expect(button(el, 'Join Open plan')).toBeDefined();
    expect(el.querySelector('[aria-label="Public rooms"]')?.textContent).toContain('3 members');
    await click(button(el, 'Join Team'));
    await until(() => selected.includes(TEAM), 'joined room selected');
    expect(calls.some((x) => x.method === 'POST' && x.path === `/chat/rooms/${TEAM}/join`)).toBe(true);
    await until(() => roomNames(el).includes('Team'), 'joined room listed');
    expect(el.querySelector('[aria-label="Public rooms"]')).toBeNull();
  });

  it('reloads when a notification names a room it does not list (someone started a conversation with me)', async () => {
    const { c, calls, sockets, mine, feedServer } = setup();
    mine.splice(1, 1);
    const el = await mount(
      c,
      <>
        <NotificationBell />
        <RoomList onSelectRoom={() => {}} />
      </>,
    );
    await memberSocket(c, sockets);
    await until(() => roomNames(el).length === 1, 'general only');
    const stream = await until(() => feedServer.streams[0], 'stream');
    await act(async () =>
      stream.event(1, {
        type: 'connected',
        userId: 'u1',
        unreadCount: 0,
        timestamp: 1,
        resumed: false,
        replayed: 0,
        resync: false,
      }),
    );
    const lists = () => calls.filter((x) => x.path === '/chat/rooms' && x.method === 'GET').length;
    const before = lists();
    mine.push(room(DM, 'direct', 'Bob', { lastSeq: 1, role: 'member', lastReadSeq: 0, unreadCount: 1 }));
    await act(async () =>
      stream.event(2, {
        type: 'new_notification',
        notification: notification('n1', { type: 'message', metadata: { data: { roomId: DM, seq: 1 } } }),
      }),
    );
    await until(() => button(el, 'Bob, 1 unread'), 'the new conversation with its badge');
    expect(lists()).toBe(before + 1);
  });
});

describe('RoomList in another language', () => {
  it('shows the texts it is given, in its buttons’ names too', async () => {
    const { c, sockets } = setup();
    const el = await mount(
      c,
      <RoomList
        onSelectRoom={() => {}}
        texts={{
          title: 'Räume',
          unread: (room, n) => `${room}, ${n} ungelesen`,
          newRoom: 'Neuer Raum',
          publicRooms: 'Öffentliche Räume',
          roomName: 'Name des Raums',
          visibility: 'Sichtbarkeit',
          kinds: { public: 'Öffentlich', private: 'Privat' },
          create: 'Raum erstellen',
          members: (n) => `${n} Mitglieder`,
          joinLabel: (room) => `${room} beitreten`,
          join: 'Beitreten',
        }}
      />,
    );
    await memberSocket(c, sockets);
    await until(() => roomNames(el).length === 2, 'rooms');
    expect(el.querySelector('h2')?.textContent).toBe('Räume');
    expect(roomNames(el)).toEqual(['General', 'Bob, 1 ungelesen']);
    await click(button(el, 'Neuer Raum'));
    expect(byLabel(el, 'Name des Raums')).toBeDefined();
    const kind = byLabel(el, 'Sichtbarkeit') as HTMLSelectElement;
    expect([...kind.options].map((o) => o.textContent)).toEqual(['Öffentlich', 'Privat']);
    await type(byLabel(el, 'Name des Raums'), 'Entwurf');
    await act(async () => button(el, 'Raum erstellen')?.closest('form')?.requestSubmit());
    await until(() => roomNames(el).includes('Entwurf'), 'created room listed');
    await click(button(el, 'Öffentliche Räume'));
    const join = await until(() => button(el, 'Team beitreten'), 'public rooms');
    expect(join.textContent).toBe('Beitreten');
    expect(el.querySelector('[aria-label="Öffentliche Räume"]')?.textContent).toContain('3 Mitglieder');
  });
});

describe('ChatRoom in other rooms', () => {
  it('a direct room: its history, sends with roomId, marks what is seen read, shows the read receipt', async () => {
    const { c, sockets, setBobRead } = setup();
    setBobRead(1);
    const el = await mount(c, <ChatRoom roomId={DM} onOpenRoom={() => {}} />);
    const s = await memberSocket(c, sockets);
    await until(() => s.sentOf('subscribe').some((f) => f.roomId === DM), 'subscribe');
    await act(async () => s.emit(subscribed(DM, 2)));
    await until(() => el.querySelectorAll('[data-testid="chat-message"]').length === 2, 'history');
    expect(el.querySelector('[data-room-id]')?.getAttribute('data-room-id')).toBe(DM);
    // Title from the room (a direct room is named after the other member).
    await until(() => el.querySelector('h2')?.textContent === 'Bob', 'title');
    // Shown at the bottom of a visible page: read up to the newest message.
    await until(() => s.sentOf('mark_read').length > 0, 'mark_read');
    expect(s.sentOf('mark_read')).toEqual([{ type: 'mark_read', roomId: DM, seq: 2 }]);
    // Bob read my first message (his stored position): "Seen" under it.
    const seen = () =>
      [...el.querySelectorAll('[data-testid="chat-message"]')].filter((m) => m.textContent?.includes('Seen'));
    await until(() => seen().length === 1, 'seen marker');
    expect(seen()[0]?.textContent).toContain('Hello Bob');
    // In a direct room the other member's name is no button (the conversation is this one).
    expect(button(el, /^Start a direct message/)).toBeUndefined();

    const input = byLabel(el, 'Message') as HTMLInputElement;
    await type(input, 'Are you there?');
    expect(s.sentOf('typing').at(-1)).toEqual({ type: 'typing', roomId: DM, isTyping: true });
    await act(async () => button(el, 'Send')?.closest('form')?.requestSubmit());
    const frame = s.sentOf('send_message')[0];
    expect(frame).toMatchObject({ type: 'send_message', roomId: DM, message: 'Are you there?' });
    await act(async () =>
      s.emit({
        type: 'new_message',
        roomId: DM,
        rev: 3,
        message: { ...message(DM, 3, 'u1', 'Are you there?'), clientMessageId: frame?.clientMessageId },
      } as unknown as ChatServerEvent),
    );
    await until(() => el.querySelectorAll('[data-testid="chat-message"]').length === 3, 'sent');
    await until(() => s.sentOf('mark_read').length === 2, 'marks the new message read');
    // Bob reads it live: the marker moves to my newest message.
    await act(async () => s.emit({ type: 'read', roomId: DM, userId: 'u2', seq: 3 } as ChatServerEvent));
    await until(() => seen()[0]?.textContent?.includes('Are you there?'), 'receipt moved');
    expect(seen()).toHaveLength(1);
    // Removed from the room (elsewhere): read-only, and it says why.
    await act(async () => s.emit({ type: 'unsubscribed', roomId: DM, reason: 'removed' } as ChatServerEvent));
    await until(() => byLabel(el, 'Message') === undefined, 'composer gone');
    expect(el.querySelector('[role="alert"]')?.textContent).toBe('You are no longer a member of this room');
  });

  it('a public room I am not in: reads, offers Join, then writes; a name in a message opens a direct room', async () => {
    const { c, calls, sockets } = setup();
    const opened: string[] = [];
    const el = await mount(c, <ChatRoom roomId={OPEN} onOpenRoom={(id) => opened.push(id)} />);
    const s = await memberSocket(c, sockets);
    await until(() => s.sentOf('subscribe').some((f) => f.roomId === OPEN), 'subscribe');
    await act(async () => s.emit(subscribed(OPEN, 1)));
    await until(() => el.textContent?.includes('Welcome'), 'history');
    const join = await until(() => button(el, 'Join Open plan'), 'join button');
    expect(byLabel(el, 'Message')).toBeUndefined();
    // Not a member: nothing is marked read (the server would answer NOT_FOUND).
    expect(s.sentOf('mark_read')).toEqual([]);
    await click(join);
    await until(() => byLabel(el, 'Message'), 'composer after joining');
    expect(calls.some((x) => x.method === 'POST' && x.path === `/chat/rooms/${OPEN}/join`)).toBe(true);
    await until(() => s.sentOf('mark_read').length === 1, 'read once a member');

    await click(button(el, 'Start a direct message with Bob'));
    await until(() => opened.length === 1, 'direct room opened');
    expect(opened).toEqual([DM]);
    expect(calls.find((x) => x.path === '/chat/direct')?.body).toEqual({ userId: 'u2' });
  });

  it('a room that does not exist (or is private to others) says so', async () => {
    const { c, sockets } = setup();
    const missing = '0d5a6e8c-2f4b-4a0c-9e95-7b6d1c2f3a54';
    const el = await mount(c, <ChatRoom roomId={missing} />);
    const s = await memberSocket(c, sockets);
    await act(async () =>
      s.emit({
        type: 'error',
        code: 'NOT_FOUND',
        message: 'Room not found',
        roomId: missing,
      } as ChatServerEvent),
    );
    await until(() => el.querySelector('[role="alert"]')?.textContent === 'Room not found', 'alert');
    expect(byLabel(el, 'Message')).toBeUndefined();
  });
});
