// @vitest-environment happy-dom
// useRooms and useRoom mounted for real: outside the provider they name themselves; useRoom follows its room while
// mounted (subscribe, first page, live frames) and unsubscribes on unmount; useRooms lists my rooms and counts a
// message of a followed room as unread.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { renderToString } from 'react-dom/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatServerEvent } from '../src/contract.js';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import { HeraldProvider, useRoom, useRooms } from '../src/react.js';
import { FakeEnvironment, FakeSocket, waitFor } from './fakes.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const ROOM = '6f1c2a4e-8b0d-4c6e-9a51-3d2f7e8b9c10';
let root: Root | null = null;
let client: HeraldClient | null = null;

afterEach(async () => {
  await act(async () => root?.unmount());
  root = null;
  client?.close();
  client = null;
});

const message = (seq: number, userId = 'u2') => ({
  id: `m${seq}`,
  roomId: ROOM,
  seq,
  userId,
  userName: 'Bob',
  userAvatar: null,
  message: `text ${seq}`,
  createdAt: `2026-01-01T00:00:0${seq}.000Z`,
});

function setup() {
  const sockets: FakeSocket[] = [];
  const openSocket = (url: string) => {
    const s = new FakeSocket(url);
    sockets.push(s);
    return s;
  };
  const c = createHeraldClient({
    baseURL: 'http://herald.test',
    fetch: async (input) => {
      const path = new URL(String(input)).pathname;
      if (path === '/auth/get-session') {
        return Response.json({
          session: { id: 's1', userId: 'u1', expiresAt: '2099-01-01T00:00:00.000Z' },
          user: { id: 'u1', email: 'ada@example.test', name: 'Ada', emailVerified: true },
        });
      }
      if (path === '/chat/rooms') {
        return Response.json({
          rooms: [
            {
              id: ROOM,
              kind: 'direct',
              name: 'Bob',
              createdBy: 'u1',
              createdAt: '2026-01-01T00:00:00.000Z',
              memberCount: 2,
              lastSeq: 1,
              lastMessageAt: '2026-01-01T00:00:01.000Z',
              role: 'member',
              lastReadSeq: 1,
              unreadCount: 0,
            },
          ],
        });
      }
      if (path === `/chat/rooms/${ROOM}/messages`)
        return Response.json({ messages: [message(1)], hasMore: false });
      return Response.json({ code: 'NOT_FOUND', message: 'no' }, { status: 404 });
    },
    WebSocket: openSocket,
    locks: null,
    BroadcastChannel: null,
    environment: new FakeEnvironment(),
    random: () => 0.5,
  });
  client = c;
  return { c, sockets };
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

function CallsHook(props: { hook: () => unknown }) {
  props.hook();
  return null;
}

function Room() {
  const { status, messages } = useRoom(ROOM);
  return <p id="room">{`${status}:${messages.map((m) => m.seq).join(',')}`}</p>;
}
function Rooms() {
  const { rooms } = useRooms();
  return <p id="rooms">{rooms.map((r) => `${r.name}:${r.unreadCount}`).join(',')}</p>;
}

describe('room hooks', () => {
  for (const [name, hook] of [
    ['useRooms', () => useRooms()],
    ['useRoom', () => useRoom(ROOM)],
  ] as const) {
    it(`${name} outside <HeraldProvider> throws an error naming the hook and the provider`, () => {
      expect(() => renderToString(<CallsHook hook={hook} />)).toThrow(
        `${name} must be used inside <HeraldProvider>`,
      );
    });
  }

  it('useRoom follows the room while mounted; useRooms counts its new messages as unread', async () => {
    const { c, sockets } = setup();
    const el = await mount(
      c,
      <>
        <Room />
        <Rooms />
      </>,
    );
    // The session resolves after the first render: the hooks reopen the socket for the signed-in user.
    await act(async () => {
      await new Promise((r) => setTimeout(r, 100));
    });
    const s = await waitFor(() => sockets.at(-1), 'socket');
    await act(async () => s.accept());
    await waitFor(() => s.sentOf('subscribe').length > 0, 'subscribe');
    await act(async () =>
      s.emit({ type: 'subscribed', roomId: ROOM, lastSeq: 1, rev: 1, replayed: 0, resync: false }),
    );
    await waitFor(() => el.querySelector('#room')?.textContent === 'live:1', 'first page');
    await waitFor(() => el.querySelector('#rooms')?.textContent === 'Bob:0', 'room list');
    await act(async () =>
      s.emit({
        type: 'new_message',
        roomId: ROOM,
        rev: 2,
        message: message(2),
      } as unknown as ChatServerEvent),
    );
    expect(el.querySelector('#room')?.textContent).toBe('live:1,2');
    expect(el.querySelector('#rooms')?.textContent).toBe('Bob:1');
    await act(async () => root?.unmount());
    root = null;
    expect(s.sentOf('unsubscribe')).toEqual([{ type: 'unsubscribe', roomId: ROOM }]);
  });
});
