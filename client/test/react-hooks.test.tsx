// @vitest-environment happy-dom
// The hooks mounted for real (react-dom in a DOM implementation): the feed runs while a signed-in component is
// mounted and stops when it unmounts; the chat socket likewise; state changes re-render.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import { HeraldProvider, useChat, useNotifications, useSession, useUnreadCount } from '../src/react.js';
import { FakeEnvironment, FakeHerald, FakeSocket, notification, waitFor } from './fakes.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

let root: Root | null = null;
let client: HeraldClient | null = null;

afterEach(async () => {
  await act(async () => root?.unmount());
  root = null;
  client?.close();
  client = null;
});

function setup(signedIn: boolean) {
  const server = new FakeHerald();
  const sockets: FakeSocket[] = [];
  const openSocket = (url: string) => {
    const s = new FakeSocket(url);
    sockets.push(s);
    return s;
  };
  client = createHeraldClient({
    baseURL: 'http://herald.test',
    fetch: async (input, init) => {
      if (new URL(String(input)).pathname === '/auth/get-session') {
        return Response.json(
          signedIn
            ? {
                session: { id: 's1', userId: 'u1', expiresAt: '2099-01-01T00:00:00.000Z' },
                user: { id: 'u1', email: 'ada@example.test', name: 'Ada', emailVerified: true },
              }
            : null,
        );
      }
      return server.fetch(input, init);
    },
    WebSocket: openSocket,
    locks: null,
    BroadcastChannel: null,
    environment: new FakeEnvironment(),
    random: () => 0.5,
    feed: { baseDelayMs: 5, maxDelayMs: 20, healthyAfterMs: 0 },
  });
  return { server, sockets, client };
}

function Bell() {
  const unread = useUnreadCount();
  const { items } = useNotifications();
  const session = useSession();
  return (
    <p id="bell">{`${session.data?.user.name ?? 'nobody'}:${unread ?? '-'}:${items.map((n) => n.title).join(',')}`}</p>
  );
}

function Chat() {
  const { status, messages } = useChat();
  return <p id="chat">{`${status}:${messages.length}`}</p>;
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

const text = (el: HTMLElement, id: string) => el.querySelector(`#${id}`)?.textContent ?? '';

describe('React hooks mounted', () => {
  it('a signed-in Bell starts the feed, re-renders on events, and unmounting stops it', async () => {
    const { server, client: c } = setup(true);
    server.items = [notification('a', { title: 'first' })];
    server.unread = 1;
    const el = await mount(c, <Bell />);
    const stream = await waitFor(() => server.streams[0], 'stream started by the hook');
    await act(async () => {
      stream.event(1, {
        type: 'connected',
        userId: 'u1',
        unreadCount: 1,
        timestamp: 1,
        resumed: false,
        replayed: 0,
        resync: false,
      });
      await waitFor(() => c.notifications.feed.getState().items.length === 1);
    });
    expect(text(el, 'bell')).toBe('Ada:1:first');
    await act(async () => {
      stream.event(2, { type: 'new_notification', notification: notification('b', { title: 'second' }) });
      stream.event(3, { type: 'unread_count_changed', unreadCount: 2 });
      await waitFor(() => c.notifications.feed.getState().unreadCount === 2);
    });
    expect(text(el, 'bell')).toBe('Ada:2:second,first');
    await act(async () => root?.unmount());
    root = null;
    expect(stream.aborted).toBe(true);
    expect(c.notifications.feed.getState().status).toBe('closed');
  });

  it('signed out, the feed is not started', async () => {
    const { server, client: c } = setup(false);
    const el = await mount(c, <Bell />);
    await act(async () => {
      await waitFor(() => c.auth.useSession.get().isPending === false, 'session read');
    });
    expect(text(el, 'bell')).toBe('nobody:-:');
    expect(server.streams).toHaveLength(0);
  });

  it('useChat connects while mounted and closes the socket on unmount', async () => {
    const { sockets, client: c } = setup(false);
    const el = await mount(c, <Chat />);
    const s = await waitFor(() => sockets[0], 'socket opened by the hook');
    await act(async () => {
      s.accept({ userId: null, role: 'guest' });
      s.emit({
        type: 'message_history',
        messages: [
          {
            id: 'm1',
            userId: 'u2',
            userName: 'Bob',
            userAvatar: null,
            message: 'hi',
            createdAt: '2026-01-01T00:00:00.000Z',
          },
        ],
      });
    });
    expect(text(el, 'chat')).toBe('open:1');
    await act(async () => root?.unmount());
    root = null;
    expect(s.closedByClient?.code).toBe(1000);
  });
});
