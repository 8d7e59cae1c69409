// The React binding: the client in React context and hooks over its stores (useSyncExternalStore), so components
// re-render exactly when the feed, the chat or the session change. Exported by `@herald/client/react` (react.tsx).
import { createContext, type ReactNode, useContext, useEffect, useMemo, useSyncExternalStore } from 'react';
import type { ChatClient, ChatState } from './chat.js';
import type { FeedState, NotificationFeed } from './feed.js';
import type { HeraldClient, Session } from './index.js';
import type { NotificationsApi } from './notifications.js';
import type { LiveRoom, LiveRoomState, RoomList, RoomListState } from './rooms.js';

const HeraldContext = createContext<HeraldClient | null>(null);

/**
 * Puts the client in React context for the hooks and components.
 * @example
 * const client = createHeraldClient({ baseURL: '' }); // the page's origin
 * createRoot(el).render(<HeraldProvider client={client}><App /></HeraldProvider>);
 */
export function HeraldProvider(props: { client: HeraldClient; children: ReactNode }) {
  return <HeraldContext.Provider value={props.client}>{props.children}</HeraldContext.Provider>;
}

function useClientFor(hookName: string): HeraldClient {
  const client = useContext(HeraldContext);
  if (!client) throw new Error(`${hookName} must be used inside <HeraldProvider>`);
  return client;
}

/**
 * The client of the nearest HeraldProvider.
 * @example
 * const client = useHeraldClient();
 * const onClick = () => client.notifications.markAllRead();
 */
export function useHeraldClient(): HeraldClient {
  return useClientFor('useHeraldClient');
}

export interface SessionState {
  data: Session | null;
  isPending: boolean;
  error: Error | null;
  refetch(): void;
}

function useSessionOf(client: HeraldClient): SessionState {
  const atom = client.auth.useSession;
  // better-auth's session atom fetches /auth/get-session when it gets its first listener and keeps the value
  // current (sign-in, sign-out, other tabs); its value object is replaced on change, as useSyncExternalStore needs.
  const value = useSyncExternalStore(
    (onChange) => atom.listen(() => onChange()),
    () => atom.get(),
    () => atom.get(),
  );
  return useMemo(
    () => ({
      data: (value.data as Session | null) ?? null,
      isPending: value.isPending,
      error: value.error,
      refetch: () => {
        void value.refetch();
      },
    }),
    [value],
  );
}

/**
 * better-auth's useSession: `{ data: { session, user } | null, isPending, error, refetch }`.
 * @example
 * const { data, isPending } = useSession();
 * if (!isPending && !data) return <SignIn />;
 */
export function useSession(): SessionState {
  return useSessionOf(useClientFor('useSession'));
}

/** Holds the feed open while mounted and signed in; the state hides a previous user's data. */
function useFeedState(hookName: string): { state: FeedState; client: HeraldClient } {
  const client = useClientFor(hookName);
  const session = useSessionOf(client);
  const userId = session.data?.user.id ?? null;
  const feed = client.notifications.feed;
  useEffect(() => {
    if (!userId) return;
    return feed.retain();
  }, [feed, userId]);
  const state = useSyncExternalStore(feed.subscribe, feed.getState, feed.getState);
  const foreign = state.userId !== null && state.userId !== userId;
  const visible = useMemo(
    () => (foreign ? { ...state, items: [], unreadCount: null } : state),
    [state, foreign],
  );
  return { state: visible, client };
}

/**
 * The live feed's state (`items`, `unreadCount`, `status`) while signed in, plus the feed and the calls.
 * @example
 * const { items, unreadCount, api } = useNotifications();
 * return <button onClick={() => api.markAllRead()}>Mark {unreadCount} read</button>;
 */
export function useNotifications(): FeedState & { feed: NotificationFeed; api: NotificationsApi } {
  const { state, client } = useFeedState('useNotifications');
  return useMemo(
    () => ({ ...state, feed: client.notifications.feed, api: client.notifications }),
    [state, client],
  );
}

/**
 * The live unread count (null until known, or signed out).
 * @example
 * const unread = useUnreadCount();
 * return <span aria-label={`Notifications, ${unread ?? 0} unread`}>{unread}</span>;
 */
export function useUnreadCount(): number | null {
  return useFeedState('useUnreadCount').state.unreadCount;
}

/**
 * Holds the chat socket open while mounted; reconnects when the signed-in user changes (guest ↔ member).
 * @example
 * const { messages, chat, status } = useChat();
 * return <button disabled={status !== 'open'} onClick={() => chat.send('Hi')}>Say hi</button>;
 */
export function useChat(): ChatState & { chat: ChatClient } {
  const client = useClientFor('useChat');
  const session = useSessionOf(client);
  const userId = session.data?.user.id ?? null;
  const chat = client.chat;
  useEffect(
    // Keyed on the user: a sign-in or sign-out reopens the socket with the new cookies.
    () => chat.retain(userId),
    [chat, userId],
  );
  const state = useSyncExternalStore(chat.subscribe, chat.getState, chat.getState);
  return useMemo(() => ({ ...state, chat }), [state, chat]);
}

/**
 * My chat rooms, most recent activity first, with unread counts kept current live (the rooms are followed on the
 * chat socket while mounted). Signed out: an empty, idle list.
 * @example const { rooms, refresh } = useRooms();
 */
export function useRooms(): RoomListState & { list: RoomList; refresh(): Promise<void> } {
  const client = useClientFor('useRooms');
  const session = useSessionOf(client);
  const userId = session.data?.user.id ?? null;
  const list = useMemo(() => client.chat.rooms.roomList(), [client]);
  useEffect(() => {
    if (!userId) return;
    // Keyed on the user: another sign-in reloads the list.
    const releaseChat = client.chat.retain(userId);
    const release = list.retain();
    return () => {
      release();
      releaseChat();
    };
  }, [client, list, userId]);
  const state = useSyncExternalStore(list.subscribe, list.getState, list.getState);
  return useMemo(
    () => ({
      ...(userId ? state : { ...state, rooms: [], status: 'idle' as const }),
      list,
      refresh: list.refresh,
    }),
    [state, list, userId],
  );
}

/**
 * One room's live state (messages by seq, presence, typing, read positions) and its actions, followed while
 * mounted; it resumes exactly after every reconnect.
 * @example const { messages, room } = useRoom(roomId); await room.send('Hello');
 */
export function useRoom(roomId: string): LiveRoomState & { room: LiveRoom } {
  const client = useClientFor('useRoom');
  const session = useSessionOf(client);
  const userId = session.data?.user.id ?? null;
  const room = useMemo(() => client.chat.rooms.room(roomId), [client, roomId]);
  useEffect(() => {
    const releaseChat = client.chat.retain(userId);
    const release = room.retain();
    return () => {
      release();
      releaseChat();
    };
  }, [client, room, userId]);
  const state = useSyncExternalStore(room.subscribe, room.getState, room.getState);
  return useMemo(() => ({ ...state, room }), [state, room]);
}
