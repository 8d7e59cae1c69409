// @vitest-environment happy-dom
// The drop-in components rendered for real (react-dom in a DOM implementation) over the SDK, with the fake
// server of fakes.ts: accessible names of CONTRACT §10, what each control sends, live updates, keyboard use, and
// an app's own texts (a translation) and locale — which never change the names §10 fixes.
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatMessage, Notification } from '../src/contract.js';
import { createHeraldClient, type HeraldClient } from '../src/index.js';
import {
  type BellTexts,
  ChatRoom,
  type ChatRoomTexts,
  defaultBellTexts,
  defaultChatRoomTexts,
  defaultInboxTexts,
  HeraldProvider,
  type InboxTexts,
  NotificationBell,
  NotificationInbox,
} from '../src/react.js';
import { FakeEnvironment, FakeHerald, FakeSocket, notification } from './fakes.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

let root: Root | null = null;
let client: HeraldClient | null = null;

afterEach(async () => {
  await act(async () => root?.unmount());
  root = null;
  client?.close();
  client = null;
  document.body.innerHTML = '';
});

interface Call {
  method: string;
  path: string;
  query: URLSearchParams;
  body: unknown;
}

function setup(signedIn: boolean) {
  const server = new FakeHerald();
  const calls: Call[] = [];
  const sockets: FakeSocket[] = [];
  const openSocket = (url: string) => {
    const s = new FakeSocket(url);
    sockets.push(s);
    return s;
  };
  client = createHeraldClient({
    baseURL: 'http://herald.test',
    fetch: async (input, init = {}) => {
      const url = new URL(String(input));
      const method = init.method ?? 'GET';
      const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
      calls.push({ method, path: url.pathname, query: url.searchParams, body });
      if (url.pathname === '/auth/get-session') {
        return Response.json(
          signedIn
            ? {
                session: { id: 's1', userId: 'u1', expiresAt: '2099-01-01T00:00:00.000Z' },
                user: { id: 'u1', email: 'ada@example.test', name: 'Ada', emailVerified: true },
              }
            : null,
        );
      }
      const read = /^\/notification\/([^/]+)\/read$/.exec(url.pathname);
      if (method === 'PATCH' && read) {
        const n = server.items.find((x) => x.id === read[1]) as Notification;
        n.read = (body as { read: boolean }).read;
        return Response.json({ notification: n });
      }
      if (method === 'PATCH' && url.pathname === '/notification/mark-all-read') {
        for (const n of server.items) n.read = true;
        return Response.json({ updatedCount: server.items.length });
      }
      if (method === 'DELETE' && url.pathname.startsWith('/notification/')) {
        const id = decodeURIComponent(url.pathname.slice('/notification/'.length));
        server.items = server.items.filter((n) => n.id !== id);
        return Response.json({ notificationId: id });
      }
      if (url.pathname === '/notification/list') {
        const filter = url.searchParams.get('filter');
        const items = server.items.filter((n) =>
          filter === 'unread' ? !n.read : filter === 'read' ? n.read : true,
        );
        const pagination = { page: 1, limit: 10, totalCount: items.length, totalPages: 1 };
        return Response.json({
          notifications: items,
          pagination: { ...pagination, hasNextPage: false, hasPreviousPage: false },
        });
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
  return { server, calls, sockets, client };
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

/** Polls `check`, letting React render between polls (state set inside one act() shows only when it ends). */
async function until<T>(check: () => T | undefined | null | false, what: string): Promise<T> {
  for (let i = 0; i < 1000; i++) {
    const v = check();
    if (v) return v;
    await act(() => new Promise((r) => setTimeout(r, 10)));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const byRole = (el: ParentNode, role: string, name: string | RegExp): HTMLElement | undefined =>
  [...el.querySelectorAll<HTMLElement>(role === 'button' ? 'button' : `[role="${role}"]`)].find((b) => {
    const label = b.getAttribute('aria-label') ?? b.textContent ?? '';
    return typeof name === 'string' ? label === name : name.test(label);
  });

/** The control a <label> names (by its text), as a screen reader or getByLabel finds it. */
function byLabel(el: ParentNode, text: string): HTMLInputElement | HTMLSelectElement | undefined {
  for (const label of el.querySelectorAll('label')) {
    const own = label.htmlFor
      ? (label.textContent ?? '')
      : (label.querySelector('span')?.textContent ?? label.textContent ?? '');
    if (own.trim() !== text) continue;
    if (label.htmlFor) return document.getElementById(label.htmlFor) as HTMLInputElement;
    return label.querySelector<HTMLInputElement | HTMLSelectElement>('input, select') ?? undefined;
  }
  return undefined;
}

async function click(target: HTMLElement | undefined) {
  if (!target) throw new Error('nothing to click');
  await act(async () => target.click());
}

/** Types into a React-controlled input (the value setter React listens to, then an input event). */
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

const connected = (unreadCount: number) => ({
  type: 'connected',
  userId: 'u1',
  unreadCount,
  timestamp: 1,
  resumed: false,
  replayed: 0,
  resync: false,
});

describe('NotificationBell', () => {
  it('names the unread count, opens a panel with the inbox, closes on Escape and gives the focus back', async () => {
    const { server, client: c } = setup(true);
    server.items = [
      notification('a', { title: 'Welcome' }),
      notification('b', { title: 'Read one', read: true }),
    ];
    server.unread = 1;
    const el = await mount(c, <NotificationBell />);
    const stream = await until(() => server.streams[0], 'stream');
    await act(async () => stream.event(1, connected(1)));
    const bell = await until(() => byRole(el, 'button', 'Notifications, 1 unread'), 'bell with count');
    expect(bell.getAttribute('aria-expanded')).toBe('false');
    expect(el.querySelector('[data-testid="unread-badge"]')?.textContent).toBe('1');

    await click(bell);
    expect(bell.getAttribute('aria-expanded')).toBe('true');
    const panel = byRole(el, 'dialog', 'Notifications');
    expect(panel?.id).toBe(bell.getAttribute('aria-controls'));
    await until(
      () => panel?.querySelectorAll('[data-testid="notification-item"]').length === 2,
      'inbox in panel',
    );

    await act(async () => {
      stream.event(2, { type: 'unread_count_changed', unreadCount: 3 });
    });
    await until(() => byRole(el, 'button', 'Notifications, 3 unread'), 'live count');

    await act(async () => {
      document.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    });
    expect(byRole(el, 'dialog', 'Notifications')).toBeUndefined();
    expect(document.activeElement).toBe(bell);
  });

  it('calls onOpen instead of opening a panel when given one, and shows no badge at zero', async () => {
    const { server, client: c } = setup(true);
    let opened = 0;
    const el = await mount(c, <NotificationBell onOpen={() => opened++} />);
    const stream = await until(() => server.streams[0], 'stream');
    await act(async () => stream.event(1, connected(0)));
    const bell = await until(() => byRole(el, 'button', 'Notifications, 0 unread'), 'bell');
    await click(bell);
    expect(opened).toBe(1);
    expect(byRole(el, 'dialog', 'Notifications')).toBeUndefined();
    expect(el.querySelector('[data-testid="unread-badge"]')).toBeNull();
  });
});

describe('NotificationInbox', () => {
  it('lists, filters, marks read, deletes, and follows live events', async () => {
    const { server, calls, client: c } = setup(true);
    server.items = [notification('a', { title: 'Alpha' }), notification('b', { title: 'Beta', read: true })];
    server.unread = 1;
    const el = await mount(c, <NotificationInbox pageSize={10} />);
    const stream = await until(() => server.streams[0], 'stream');
    await act(async () => stream.event(1, connected(1)));
    await until(() => el.querySelectorAll('[data-testid="notification-item"]').length === 2, 'two items');
    expect(el.querySelector('h2')?.textContent).toBe('Notifications');
    expect([...el.querySelectorAll('h3')].map((h) => h.textContent)).toEqual(['Unread: Alpha', 'Beta']);
    expect(calls.find((x) => x.path === '/notification/list')?.query.get('limit')).toBe('10');

    await click(byRole(el, 'button', 'Mark read: Alpha'));
    expect(calls.filter((x) => x.method === 'PATCH').at(-1)).toMatchObject({
      path: '/notification/a/read',
      body: { read: true },
    });
    await until(() => byRole(el, 'button', 'Mark unread: Alpha'), 'marked read');

    await click(byRole(el, 'button', 'Unread'));
    expect(byRole(el, 'button', 'Unread')?.getAttribute('aria-pressed')).toBe('true');
    await until(
      () => el.querySelector('.herald-empty')?.textContent === 'No notifications match.',
      'none unread',
    );
    expect(
      calls
        .filter((x) => x.path === '/notification/list')
        .at(-1)
        ?.query.get('filter'),
    ).toBe('unread');
    await click(byRole(el, 'button', 'All'));

    await type(byLabel(el, 'Filter by type'), 'warning');
    await until(
      () =>
        calls
          .filter((x) => x.path === '/notification/list')
          .at(-1)
          ?.query.get('type') === 'warning',
      'type filter sent',
    );
    await type(byLabel(el, 'Filter by type'), '');
    await until(() => byRole(el, 'button', 'Delete: Beta'), 'all types again');

    await click(byRole(el, 'button', 'Delete: Beta'));
    expect(calls.some((x) => x.method === 'DELETE' && x.path === '/notification/b')).toBe(true);
    await until(() => el.querySelectorAll('[data-testid="notification-item"]').length === 1, 'one left');

    // Live: a new notification elsewhere refetches the page.
    server.items = [notification('c', { title: 'Gamma' }), ...server.items];
    await act(async () => {
      server.last.event(2, { type: 'new_notification', notification: notification('c', { title: 'Gamma' }) });
    });
    await until(
      () => [...el.querySelectorAll('h3')].some((h) => h.textContent === 'Unread: Gamma'),
      'live item',
    );

    // Delete all asks first.
    await click(byRole(el, 'button', 'Delete all'));
    expect(calls.some((x) => x.path === '/notification/delete-all')).toBe(false);
    expect(byRole(el, 'button', 'Yes, delete all')).toBeDefined();
    await click(byRole(el, 'button', 'Cancel'));
    expect(byRole(el, 'button', 'Delete all')).toBeDefined();
  });
});

const message = (
  id: string,
  userId: string,
  text: string,
  extra: Partial<ChatMessage> = {},
): ChatMessage => ({
  id,
  userId,
  userName: userId === 'u1' ? 'Ada' : 'Bob',
  userAvatar: null,
  message: text,
  createdAt: '2026-01-01T00:00:00.000Z',
  ...extra,
});

describe('ChatRoom', () => {
  it('a member sees the empty state, sends, edits, deletes, and sees typing and presence', async () => {
    const { sockets, client: c } = setup(true);
    const el = await mount(c, <ChatRoom />);
    // The socket opened once the session is known (a guest's socket is replaced when the session arrives).
    await until(() => c.auth.useSession.get().data !== null, 'session');
    const s = await until(() => sockets.find((x) => x.closedByClient === null), 'member socket');
    await act(async () => s.accept({ userId: 'u1', role: 'member' }, []));
    expect(el.querySelector('[data-room-id]')?.getAttribute('data-room-id')).toBe('general');
    await until(
      () => el.querySelector('[data-testid="chat-empty"]')?.textContent === 'No messages yet. Say hello!',
      'empty',
    );

    const input = byLabel(el, 'Message') as HTMLInputElement;
    expect(input).toBeDefined();
    const send = byRole(el, 'button', 'Send') as HTMLButtonElement;
    expect(send.disabled).toBe(true);
    await type(input, 'Hello there');
    expect(s.sentOf('typing')).toEqual([{ type: 'typing', isTyping: true }]);
    expect(send.disabled).toBe(false);
    await act(async () => send.closest('form')?.requestSubmit());
    const frame = s.sentOf('send_message')[0];
    expect(frame).toMatchObject({ type: 'send_message', message: 'Hello there' });
    expect(input.value).toBe('');
    await act(async () =>
      s.emit({
        type: 'new_message',
        message: message('m1', 'u1', 'Hello there', { clientMessageId: frame?.clientMessageId as string }),
      }),
    );
    await until(() => el.querySelectorAll('[data-testid="chat-message"]').length === 1, 'own message');
    expect(el.querySelector('[data-testid="chat-empty"]')).toBeNull();

    await click(byRole(el, 'button', 'Edit'));
    const edit = byLabel(el, 'Edit message');
    expect(document.activeElement).toBe(edit);
    await type(edit, 'Hello again');
    await act(async () => edit?.closest('form')?.requestSubmit());
    expect(s.sentOf('edit_message')).toEqual([
      { type: 'edit_message', messageId: 'm1', message: 'Hello again' },
    ]);

    await click(byRole(el, 'button', 'Delete'));
    expect(s.sentOf('delete_message')).toEqual([{ type: 'delete_message', messageId: 'm1' }]);

    await act(async () => {
      s.emit({ type: 'typing', userId: 'u2', userName: 'Bob', isTyping: true });
      s.emit({ type: 'presence', guests: 1, members: 2, admins: 0 });
    });
    expect(el.textContent).toContain('Bob is typing…');
    expect(el.textContent).toContain('2 members and 1 guest online');
    // Someone else's message has no Edit or Delete for a member.
    await act(async () => s.emit({ type: 'new_message', message: message('m2', 'u2', 'Hi Ada') }));
    const theirs = [...el.querySelectorAll('[data-testid="chat-message"]')].find((m) =>
      m.textContent?.includes('Hi Ada'),
    );
    expect(theirs?.querySelector('button')).toBeNull();
  });

  it('a guest reads without a composer and sees the notice the app gives', async () => {
    const { sockets, client: c } = setup(false);
    const el = await mount(c, <ChatRoom guestNotice={<a href="/sign-in">Sign in to write</a>} />);
    const s = await until(() => sockets[0], 'socket');
    await act(async () => s.accept({ userId: null, role: 'guest' }, [message('m1', 'u2', 'Welcome')]));
    await until(() => el.querySelectorAll('[data-testid="chat-message"]').length === 1, 'history');
    expect(byLabel(el, 'Message')).toBeUndefined();
    expect(byRole(el, 'button', 'Send')).toBeUndefined();
    expect(el.querySelector('a[href="/sign-in"]')?.textContent).toBe('Sign in to write');
  });
});

// An app's translation (the SDK ships English only; the web app passes German from its dictionary).
const inboxDe: Partial<InboxTexts> = {
  title: 'Benachrichtigungen',
  unread: (n) => `${n} ungelesen`,
  show: 'Anzeigen',
  filters: { all: 'Alle', unread: 'Ungelesen', read: 'Gelesen' },
  filterByType: 'Nach Art filtern',
  types: { ...defaultInboxTexts.types, warning: 'Warnung' },
  markReadLabel: (title) => `Als gelesen markieren: ${title}`,
  markRead: 'Als gelesen markieren',
  deleteLabel: (title) => `Löschen: ${title}`,
  noMatch: 'Keine passenden Benachrichtigungen.',
};

describe('texts and locale (an app in another language)', () => {
  it('the inbox shows the texts it is given and dates in the locale; untouched texts stay English', async () => {
    const { server, client: c } = setup(true);
    server.items = [
      notification('a', { title: 'Alpha', type: 'warning', createdAt: '2025-03-04T10:05:00.000Z' }),
    ];
    server.unread = 1;
    const el = await mount(c, <NotificationInbox pageSize={10} texts={inboxDe} locale="de" />);
    const stream = await until(() => server.streams[0], 'stream');
    await act(async () => stream.event(1, connected(1)));
    await until(() => el.querySelectorAll('[data-testid="notification-item"]').length === 1, 'item');
    expect(el.querySelector('h2')?.textContent).toBe('Benachrichtigungen');
    expect(el.textContent).toContain('1 ungelesen');
    expect(el.querySelector('fieldset')?.getAttribute('aria-label')).toBe('Anzeigen');
    expect(byRole(el, 'button', 'Alle')?.getAttribute('aria-pressed')).toBe('true');
    expect(byLabel(el, 'Nach Art filtern')).toBeDefined();
    expect(el.querySelector('.herald-tag')?.textContent).toBe('Warnung');
    expect(byRole(el, 'button', 'Als gelesen markieren: Alpha')?.textContent).toBe('Als gelesen markieren');
    expect(byRole(el, 'button', 'Löschen: Alpha')?.textContent).toBe('Delete');
    expect(byRole(el, 'button', 'Mark all read')).toBeDefined();
    // Not today: day, month and time as German readers write them.
    const shown = new Intl.DateTimeFormat('de', {
      month: 'short',
      day: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
    }).format(new Date('2025-03-04T10:05:00.000Z'));
    expect(el.querySelector('time')?.textContent).toBe(shown);
    expect(shown).toMatch(/^4\. März/);

    await click(byRole(el, 'button', 'Gelesen'));
    await until(
      () => el.querySelector('.herald-empty')?.textContent === 'Keine passenden Benachrichtigungen.',
      'none',
    );
  });

  it('the bell keeps the contract’s accessible name whatever its texts; the tooltip and the panel follow them', async () => {
    const { server, client: c } = setup(true);
    server.unread = 2;
    const el = await mount(
      c,
      <NotificationBell
        texts={{ panel: 'Benachrichtigungen', tooltip: (n) => `Benachrichtigungen, ${n} ungelesen` }}
        inboxTexts={inboxDe}
      />,
    );
    const stream = await until(() => server.streams[0], 'stream');
    await act(async () => stream.event(1, connected(2)));
    const bell = await until(() => byRole(el, 'button', 'Notifications, 2 unread'), 'bell');
    expect(bell.getAttribute('title')).toBe('Benachrichtigungen, 2 ungelesen');
    await click(bell);
    expect(byRole(el, 'dialog', 'Benachrichtigungen')).toBeDefined();
    // The default panel's inbox speaks the app's language too.
    await until(() => el.querySelector('[role="dialog"] h2')?.textContent === 'Benachrichtigungen', 'inbox');
    // The type of `texts` has no way to rename the bell.
    // @ts-expect-error: the accessible name is not a text to translate (CONTRACT §10)
    const renamed: Partial<BellTexts> = { label: () => 'Glocke' };
    expect(renamed).toBeDefined();
  });

  it('the chat shows the texts it is given, while its input stays `Message` and its button `Send`', async () => {
    const { sockets, client: c } = setup(true);
    const el = await mount(
      c,
      <ChatRoom
        texts={{
          title: 'Unterhaltung',
          messages: 'Nachrichten',
          emptyInvite: 'Noch keine Nachrichten. Sag hallo!',
          placeholder: 'Nachricht schreiben',
          presence: (members, guests) => `${members} Mitglieder und ${guests} Gäste online`,
          typing: (name) => `${name} schreibt…`,
          edit: 'Bearbeiten',
        }}
        locale="de"
      />,
    );
    await until(() => c.auth.useSession.get().data !== null, 'session');
    const s = await until(() => sockets.find((x) => x.closedByClient === null), 'member socket');
    await act(async () => s.accept({ userId: 'u1', role: 'member' }, []));
    await until(
      () =>
        el.querySelector('[data-testid="chat-empty"]')?.textContent === 'Noch keine Nachrichten. Sag hallo!',
      'empty',
    );
    expect(el.querySelector('h2')?.textContent).toBe('Unterhaltung');
    expect(el.querySelector('[role="log"]')?.getAttribute('aria-label')).toBe('Nachrichten');
    const input = byLabel(el, 'Message') as HTMLInputElement;
    expect(input.placeholder).toBe('Nachricht schreiben');
    expect(byRole(el, 'button', 'Send')?.textContent).toBe('Send');

    await act(async () => {
      s.emit({
        type: 'new_message',
        message: message('m1', 'u1', 'Hallo', { createdAt: '2025-03-04T10:05:00.000Z' }),
      });
      s.emit({ type: 'typing', userId: 'u2', userName: 'Bob', isTyping: true });
      s.emit({ type: 'presence', guests: 1, members: 2, admins: 0 });
    });
    await until(() => el.textContent?.includes('Bob schreibt…'), 'typing');
    expect(el.textContent).toContain('2 Mitglieder und 1 Gäste online');
    expect(byRole(el, 'button', 'Bearbeiten')).toBeDefined();
    expect(byRole(el, 'button', 'Delete')).toBeDefined();
    expect(el.querySelector('[data-testid="chat-message"] time')?.textContent).toMatch(/^4\. März/);
    // @ts-expect-error: `Send` and `Message` are CONTRACT §10's names, not texts
    const send: Partial<ChatRoomTexts> = { send: 'Senden' };
    expect(send).toBeDefined();
  });

  it('exports the English defaults an app starts its translation from', () => {
    expect(defaultInboxTexts.filters).toEqual({ all: 'All', unread: 'Unread', read: 'Read' });
    expect(defaultInboxTexts.types.friend_request).toBe('Friend request');
    expect(defaultChatRoomTexts.presence(1, 2)).toBe('1 member and 2 guests online');
    expect(defaultBellTexts.tooltip(3)).toBe('Notifications, 3 unread');
  });
});
