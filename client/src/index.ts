// @herald/client: createHeraldClient and the types of Herald's API. See client/README.md.
import { type AdminApi, createAdminApi } from './admin.js';
import { type AuthClient, createHeraldAuth } from './auth.js';
import { type ChatClient, type ChatOptions, createChatClient, type WebSocketFactory } from './chat.js';
import { browserEnvironment, type ClientEnvironment } from './environment.js';
import {
  type BroadcastChannelCtor,
  createNotificationFeed,
  type FeedOptions,
  type LockManagerLike,
} from './feed.js';
import { createHttp, normaliseBaseURL } from './http.js';
import { signOutAfterInFlight } from './in-flight.js';
import { createNotificationCalls, type NotificationsApi } from './notifications.js';
import { checkOrigin, type OriginCheck, originRefusedMessage } from './origin.js';
import { createPushApi } from './push.js';
import { createRooms, type RoomsApi } from './rooms.js';

export type { AdminApi, ApiKeysAdminApi, WebhooksAdminApi } from './admin.js';
export type { AuthClient, Session } from './auth.js';
export type {
  ChatClient,
  ChatOptions,
  ChatState,
  ChatStatus,
  WebSocketFactory,
  WebSocketLike,
} from './chat.js';
export { HeraldChatError, mergeHistory } from './chat.js';
export * from './contract.js';
export { type CookieFetch, type CookieFetchOptions, createCookieFetch } from './cookies.js';
export type { ClientEnvironment, EnvironmentEvent } from './environment.js';
export { HeraldApiError } from './errors.js';
export type {
  BroadcastChannelCtor,
  BroadcastChannelLike,
  FeedEvent,
  FeedOptions,
  FeedState,
  FeedStatus,
  LockManagerLike,
  NotificationFeed,
} from './feed.js';
export { applyFeedEvent } from './feed.js';
export type { FetchLike } from './http.js';
export type { NotificationsApi } from './notifications.js';
export { type OriginCheck, originRefusedMessage } from './origin.js';
export { base64UrlToBytes, type PushApi, type PushSubscribeOptions } from './push.js';
export type { LiveRoom, LiveRoomState, RoomList, RoomListState, RoomsApi } from './rooms.js';
export { HeraldRoomError, mergeRoomMessages } from './rooms.js';
export { type SseMessage, SseParser } from './sse.js';

export interface HeraldClientOptions {
  /** The service's URL, e.g. 'http://localhost:3001'; '' (or window.location.origin) for the same origin. */
  baseURL: string;
  /** Injectable fetch (Node: one that keeps cookies). Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Opens the chat socket (Node: the `ws` package with Cookie/Origin headers). Defaults to the global WebSocket. */
  WebSocket?: WebSocketFactory;
  /** Web Locks for electing the tab that holds the feed; defaults to navigator.locks in a page; null: one stream per tab. */
  locks?: LockManagerLike | null;
  /** BroadcastChannel for feeding the other tabs; defaults to the global one in a page; null: one stream per tab. */
  BroadcastChannel?: BroadcastChannelCtor | null;
  /** Uniform [0, 1) source of the reconnect jitter (tests). */
  random?: () => number;
  /** Network and visibility signals; defaults to the browser's (always online and visible in Node). */
  environment?: ClientEnvironment;
  /** Tuning of the notification feed (page size, backoff). */
  feed?: FeedOptions;
  /** Tuning of the chat socket (backoff, typing timeout). */
  chat?: ChatOptions;
}

export interface HeraldClient {
  /**
   * better-auth's client with the admin, magic-link and username plugins (CONTRACT §1).
   * @example
   * await client.auth.signUp.email({ email, password, name });
   * await client.auth.signIn.email({ email, password });
   * const { data } = await client.auth.getSession();
   * await client.auth.signOut();
   */
  auth: AuthClient;
  /**
   * Every notification call, and the live feed.
   * @example
   * const page = await client.notifications.list({ filter: 'unread' });
   */
  notifications: NotificationsApi;
  /**
   * The chat socket (`general`, §6) and `chat.rooms`: rooms, direct messages and their live state (§6.1).
   * @example
   * client.chat.connect();
   * await client.chat.send('Hello!');
   * const dm = await client.chat.rooms.direct(otherUserId);
   */
  chat: ChatClient & { rooms: RoomsApi };
  /**
   * Herald's admin routes.
   * @example
   * await client.admin.purgeMessages(userId);
   */
  admin: AdminApi;
  /**
   * Whether the service accepts this page's origin (GET /client-config); null when it cannot tell. An untrusted
   * origin can read but not sign in or chat: show `originRefusedMessage(check)`, which names the setting.
   *
   * @example
   * const check = await client.checkOrigin();
   * if (check && !check.trusted) showBanner(originRefusedMessage(check));
   */
  checkOrigin(): Promise<OriginCheck | null>;
  /**
   * Stops the feed and the chat socket.
   *
   * @example
   * window.addEventListener('pagehide', () => client.close());
   */
  close(): void;
}

interface MaybeBrowserGlobals {
  location?: { origin?: string };
  document?: unknown;
  navigator?: { locks?: LockManagerLike };
  BroadcastChannel?: BroadcastChannelCtor;
  WebSocket?: new (url: string) => import('./chat.js').WebSocketLike;
}

/**
 * ws:// or wss:// for the chat endpoint of an http(s) base URL.
 * @example
 * chatSocketURL('https://herald.example.com'); // 'wss://herald.example.com/chat'
 */
export function chatSocketURL(httpBase: string): string {
  const u = new URL(`${httpBase}/chat`);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.toString();
}

/**
 * The Herald client: accounts (`auth`, better-auth's client), notifications and their live feed, chat, admin calls.
 * @example
 * import { createHeraldClient } from '@herald/client';
 *
 * const client = createHeraldClient({ baseURL: 'http://localhost:3001' });
 * await client.auth.signIn.email({ email: 'ada@example.com', password: 'correct horse battery' });
 * const unread = await client.notifications.unreadCount();
 */
export function createHeraldClient(options: HeraldClientOptions): HeraldClient {
  const g = globalThis as unknown as MaybeBrowserGlobals;
  const baseURL = normaliseBaseURL(options.baseURL);
  // Same-origin ('') still needs absolute URLs for better-auth and the socket.
  const absoluteBase = baseURL || normaliseBaseURL(g.location?.origin ?? '');
  if (!/^https?:\/\//.test(absoluteBase)) {
    throw new Error(
      `createHeraldClient: baseURL must be an http(s) URL${baseURL ? '' : " ('' means the page's origin, and there is no page here)"}`,
    );
  }
  const fetchImpl = signOutAfterInFlight(
    options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    `${absoluteBase}/auth/sign-out`,
  );
  const http = createHttp(baseURL, fetchImpl);
  const env = options.environment ?? browserEnvironment();
  const inPage = g.document !== undefined;
  const random = options.random ?? Math.random;
  const auth = createHeraldAuth(`${absoluteBase}/auth`, fetchImpl);
  const calls = createNotificationCalls(http);

  const feed = createNotificationFeed({
    baseURL,
    fetch: fetchImpl,
    list: calls.list,
    unreadCount: calls.unreadCount,
    env,
    random,
    // Shared only in a page by default: tabs share cookies, so one stream serves them all. Node (which may have
    // navigator.locks and BroadcastChannel too) often runs several clients with different sessions in a process.
    locks: options.locks === undefined ? (inPage ? (g.navigator?.locks ?? null) : null) : options.locks,
    BroadcastChannel:
      options.BroadcastChannel === undefined
        ? inPage
          ? (g.BroadcastChannel ?? null)
          : null
        : options.BroadcastChannel,
    options: options.feed,
  });

  const origin = () =>
    checkOrigin(baseURL, fetchImpl, inPage && g.location?.origin ? { origin: g.location.origin } : null);

  const createSocket: WebSocketFactory =
    options.WebSocket ??
    ((url) => {
      if (!g.WebSocket) throw new Error('No WebSocket implementation: pass options.WebSocket');
      return new g.WebSocket(url);
    });

  const chat = createChatClient({
    http,
    url: chatSocketURL(absoluteBase),
    createSocket,
    env,
    random,
    checkSession: async () => {
      const res = await auth.getSession();
      return Boolean(res.data?.session);
    },
    uuid: () => globalThis.crypto.randomUUID(),
    diagnose: async () => {
      const check = await origin();
      return check && !check.trusted
        ? { code: 'ORIGIN_NOT_ALLOWED', message: originRefusedMessage(check) }
        : null;
    },
    options: options.chat,
  });

  return {
    auth,
    notifications: { ...calls, feed, push: createPushApi(http) },
    chat: Object.assign(chat, {
      rooms: createRooms({ http, chat, uuid: () => globalThis.crypto.randomUUID() }),
    }),
    admin: createAdminApi(http),
    checkOrigin: origin,
    close() {
      feed.stop();
      chat.disconnect();
    },
  };
}
