// The live notification feed: one SSE connection (GET /notification/stream) per browser, read with fetch
// streaming (EventSource cannot send Last-Event-ID on the first connect nor use an injected fetch), applied to a
// store holding the first page of the list and the unread count. Where the browser has Web Locks and
// BroadcastChannel, the tab holding the lock is the leader: it alone connects and rebroadcasts every raw event to
// the other tabs (followers), which apply them with the same reducer. The reconnect policy is in client/README.md.
import { Backoff } from './backoff.js';
import type { ListQuery, ListResponse, Notification, NotificationStreamEvent } from './contract.js';
import { type ClientEnvironment, interruptibleSleep } from './environment.js';
import type { FetchLike } from './http.js';
import { SseParser } from './sse.js';
import { Emitter, Holds, Store } from './store.js';

export type FeedStatus = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'offline' | 'closed';

export interface FeedState {
  status: FeedStatus;
  /** The user the stream belongs to (from `connected`); null before the first connect. */
  userId: string | null;
  /** Unread notifications of the user; null until known. */
  unreadCount: number | null;
  /** First page of the list (`pageSize` items at most), newest first. */
  items: Notification[];
  /** Cursor of the last event seen; sent as Last-Event-ID on reconnect. */
  lastEventId: string | null;
  /** How many times the server asked for a full refetch (`connected.resync`). */
  resyncs: number;
  /** Why the feed stopped (SESSION_REVOKED, UNAUTHORIZED, …) or the last refetch failed; null when fine. */
  error: { code: string; message: string } | null;
}

/** Every SSE event the feed applied, as the server sent it (`type` equals the event name). */
export type FeedEvent = NotificationStreamEvent;

/** The live feed (`client.notifications.feed`): the first page and the unread count, kept current over SSE. */
export interface NotificationFeed {
  /**
   * Opens the stream (signed in): the first page and the count are loaded, then kept current.
   * @example
   * client.notifications.feed.start();
   */
  start(): void;
  /**
   * Closes the stream, whatever holds it.
   * @example
   * client.notifications.feed.stop();
   */
  stop(): void;
  /**
   * The current state: `items`, `unreadCount`, `status`, `error`.
   * @example
   * const { unreadCount, items } = client.notifications.feed.getState();
   */
  getState(): FeedState;
  /**
   * Called on every state change; returns the unsubscribe function.
   * @example
   * const off = client.notifications.feed.subscribe((s) => console.log(s.unreadCount));
   */
  subscribe(listener: (s: FeedState) => void): () => void;
  /**
   * Called with every stream event (`new_notification`, `unread_count_changed`, …); returns the unsubscribe function.
   * @example
   * client.notifications.feed.onEvent((e) => {
   *   if (e.type === 'new_notification') console.log(e.notification.title);
   * });
   */
  onEvent(listener: (e: FeedEvent) => void): () => void;
  /**
   * Reloads the first page and the count now.
   * @example
   * await client.notifications.feed.refresh();
   */
  refresh(): Promise<void>;
  /**
   * Keeps the feed running while held (reference counted, for components); the returned function releases.
   * `start()`/`stop()` are absolute: `stop()` ends the feed whatever holds it.
   * @example
   * const release = client.notifications.feed.retain();
   * // later
   * release();
   */
  retain(): () => void;
}

export interface LockManagerLike {
  request<T>(
    name: string,
    options: { signal?: AbortSignal },
    callback: (lock: unknown) => Promise<T> | T,
  ): Promise<T>;
}

export interface BroadcastChannelLike {
  postMessage(message: unknown): void;
  close(): void;
  onmessage: ((event: { data: unknown }) => void) | null;
}

export type BroadcastChannelCtor = new (name: string) => BroadcastChannelLike;

export interface FeedOptions {
  /** Size of the kept first page (default 20). */
  pageSize?: number;
  /** First reconnect window (ms, default 1000). */
  baseDelayMs?: number;
  /** Largest reconnect window (ms, default 30000). */
  maxDelayMs?: number;
  /** A stream that stayed open this long after `connected` resets the backoff (ms, default 5000). */
  healthyAfterMs?: number;
  /** No byte for this long (keep_alive comes every 15 s) means a dead connection: reconnect (ms, default 45000). */
  staleAfterMs?: number;
}

export interface FeedDeps {
  baseURL: string;
  fetch: FetchLike;
  list(q: ListQuery): Promise<ListResponse>;
  unreadCount(): Promise<number>;
  env: ClientEnvironment;
  random: () => number;
  locks: LockManagerLike | null;
  BroadcastChannel: BroadcastChannelCtor | null;
  options?: FeedOptions;
}

/** Codes of a stream `error` event after which reconnecting cannot help: the session is gone. */
const TERMINAL_STREAM_CODES = new Set(['SESSION_REVOKED', 'SESSION_EXPIRED', 'UNAUTHORIZED']);

export const initialFeedState: FeedState = {
  status: 'idle',
  userId: null,
  unreadCount: null,
  items: [],
  lastEventId: null,
  resyncs: 0,
  error: null,
};

/**
 * Applies one state-changing event to the list and count; other events leave the state as it is.
 * @example
 * state = applyFeedEvent(state, event, 20);
 */
export function applyFeedEvent(state: FeedState, event: FeedEvent, pageSize: number): FeedState {
  switch (event.type) {
    case 'new_notification': {
      const rest = state.items.filter((n) => n.id !== event.notification.id);
      return { ...state, items: [event.notification, ...rest].slice(0, pageSize) };
    }
    case 'notification_updated':
      return {
        ...state,
        items: state.items.map((n) => (n.id === event.notification.id ? event.notification : n)),
      };
    case 'notification_deleted':
      return { ...state, items: state.items.filter((n) => n.id !== event.notificationId) };
    case 'notifications_cleared':
      return { ...state, items: [] };
    case 'unread_count_changed':
      return { ...state, unreadCount: event.unreadCount };
    case 'connected':
      // Another user signed in on this browser: nothing of the previous one is kept.
      if (state.userId !== null && state.userId !== event.userId) {
        return { ...state, userId: event.userId, items: [], unreadCount: event.unreadCount };
      }
      return { ...state, userId: event.userId, unreadCount: event.unreadCount };
    default:
      return state;
  }
}

type ChannelMessage =
  | { t: 'hello' }
  | { t: 'event'; id: string | null; event: FeedEvent }
  | { t: 'snapshot'; state: FeedState; loaded: boolean };

type StreamOutcome =
  | { kind: 'retry'; healthy: boolean; retryAfterMs?: number }
  | { kind: 'terminal'; code: string; message: string };

function isFeedEvent(v: unknown): v is FeedEvent {
  return typeof v === 'object' && v !== null && typeof (v as { type?: unknown }).type === 'string';
}

export function createNotificationFeed(deps: FeedDeps): NotificationFeed {
  const opts = {
    pageSize: deps.options?.pageSize ?? 20,
    baseDelayMs: deps.options?.baseDelayMs ?? 1000,
    maxDelayMs: deps.options?.maxDelayMs ?? 30_000,
    healthyAfterMs: deps.options?.healthyAfterMs ?? 5000,
    staleAfterMs: deps.options?.staleAfterMs ?? 45_000,
  };
  const store = new Store<FeedState>(initialFeedState);
  const events = new Emitter<FeedEvent>();
  const sharing =
    deps.locks && deps.BroadcastChannel ? { locks: deps.locks, BC: deps.BroadcastChannel } : null;
  const lockName = `herald:feed:${deps.baseURL}`;

  let manual = false;
  // Released holds re-evaluate whether the connection should stay open.
  const holds = new Holds(() => reconcile());
  /** Aborts everything of the current run (stream, lock request, sleeps). */
  let run: AbortController | null = null;
  let role: 'direct' | 'leader' | 'follower' = 'direct';
  let channel: BroadcastChannelLike | null = null;
  let releaseLock: (() => void) | null = null;
  /** The list and count were fetched at least once (else the first `connected` refetches). */
  let loaded = false;
  /** Events applied while a refetch is in flight, replayed on top of its result. */
  let duringRefresh: FeedEvent[] | null = null;
  let refreshGen = 0;

  const set = (patch: Partial<FeedState>) => {
    const before = store.get();
    store.update(patch);
    // Followers mirror the leader's status and errors; other changes reach them as raw events.
    if (role === 'leader' && (patch.status !== undefined || patch.error !== undefined)) {
      const after = store.get();
      if (after.status !== before.status || after.error !== before.error) broadcastSnapshot();
    }
  };

  const post = (m: ChannelMessage) => {
    try {
      channel?.postMessage(m);
    } catch {
      // A closed channel (tab closing): the followers will elect a new leader.
    }
  };
  const broadcastSnapshot = () => post({ t: 'snapshot', state: store.get(), loaded });

  const apply = (event: FeedEvent, id: string | null) => {
    const state = store.get();
    let next = applyFeedEvent(state, event, opts.pageSize);
    if (id !== null && id !== state.lastEventId) next = { ...next, lastEventId: id };
    store.set(next);
    duringRefresh?.push(event);
    events.emit(event);
  };

  const refresh = async (): Promise<void> => {
    const gen = ++refreshGen;
    duringRefresh = [];
    try {
      const [list, unread] = await Promise.all([deps.list({ limit: opts.pageSize }), deps.unreadCount()]);
      if (gen !== refreshGen) return;
      // Events that arrived while the requests ran are re-applied: each is idempotent (ids, absolute counts),
      // so the result is never older than what the stream already said.
      let next: FeedState = { ...store.get(), items: list.notifications, unreadCount: unread, error: null };
      for (const e of duringRefresh ?? []) next = applyFeedEvent(next, e, opts.pageSize);
      duringRefresh = null;
      loaded = true;
      store.set(next);
      if (role === 'leader') broadcastSnapshot();
    } catch (err) {
      if (gen === refreshGen) duringRefresh = null;
      const e = err as { code?: unknown; message?: unknown };
      set({
        error: {
          code: typeof e.code === 'string' ? e.code : 'REFRESH_FAILED',
          message: typeof e.message === 'string' ? e.message : 'Could not load notifications',
        },
      });
      throw err;
    }
  };
  const refreshQuietly = () => {
    refresh().catch(() => {
      // Already in state.error; the next `connected` or a manual refresh retries.
    });
  };

  /** One connection: resolves when it ends, saying whether to retry. */
  const streamOnce = async (signal: AbortSignal): Promise<StreamOutcome> => {
    const conn = new AbortController();
    const abortConn = () => conn.abort();
    signal.addEventListener('abort', abortConn, { once: true });
    const offOffline = deps.env.on('offline', abortConn);
    let watchdog: ReturnType<typeof setTimeout> | undefined;
    const feedWatchdog = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(abortConn, opts.staleAfterMs);
    };
    let openedAt: number | null = null;
    const healthy = () => openedAt !== null && Date.now() - openedAt >= opts.healthyAfterMs;
    try {
      const lastEventId = store.get().lastEventId;
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastEventId !== null) headers['last-event-id'] = lastEventId;
      let res: Response;
      try {
        res = await deps.fetch(`${deps.baseURL}/notification/stream`, {
          headers,
          credentials: 'include',
          cache: 'no-store',
          signal: conn.signal,
        });
      } catch {
        return { kind: 'retry', healthy: false };
      }
      if (res.status === 401 || res.status === 403) {
        const body = (await res.json().catch(() => null)) as { code?: string; message?: string } | null;
        return {
          kind: 'terminal',
          code: body?.code ?? (res.status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN'),
          message: body?.message ?? 'The session is no longer valid',
        };
      }
      if (!res.ok || !res.body) {
        await res.body?.cancel().catch(() => {});
        // 429 and 503 say when to come back; still jittered on top by the caller's floor.
        const retryAfter = Number(res.headers.get('retry-after'));
        return {
          kind: 'retry',
          healthy: false,
          retryAfterMs: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
        };
      }
      const reader = res.body.getReader();
      const parser = new SseParser(lastEventId);
      feedWatchdog();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          feedWatchdog();
          for (const msg of parser.push(value)) {
            let event: unknown;
            try {
              event = JSON.parse(msg.data);
            } catch {
              continue; // not ours; the contract always sends JSON
            }
            if (!isFeedEvent(event)) continue;
            if (event.type === 'error') {
              if (msg.id !== null) set({ lastEventId: msg.id });
              events.emit(event);
              if (role === 'leader') post({ t: 'event', id: msg.id, event });
              if (TERMINAL_STREAM_CODES.has(event.code)) {
                return { kind: 'terminal', code: event.code, message: event.message };
              }
              continue; // SHUTTING_DOWN, RESYNC_REQUIRED, …: the server ends the stream; reconnect
            }
            if (event.type === 'connected') {
              openedAt = Date.now();
              if (store.get().userId !== event.userId) loaded = false;
              set({ status: 'open', error: null });
              if (event.resync) set({ resyncs: store.get().resyncs + 1 });
            }
            apply(event, msg.id);
            if (role === 'leader') post({ t: 'event', id: msg.id, event });
            if (event.type === 'connected' && (event.resync || !loaded)) refreshQuietly();
          }
        }
      } catch {
        // Network drop, abort (offline, stop, watchdog): reconnect unless stopped.
      } finally {
        reader.cancel().catch(() => {});
      }
      return { kind: 'retry', healthy: healthy() };
    } finally {
      clearTimeout(watchdog);
      offOffline();
      signal.removeEventListener('abort', abortConn);
    }
  };

  /** The reconnect loop of the tab that owns the connection (direct or leader). */
  const connectLoop = async (signal: AbortSignal) => {
    const backoff = new Backoff({ baseMs: opts.baseDelayMs, capMs: opts.maxDelayMs, random: deps.random });
    let everOpened = false;
    while (!signal.aborted) {
      if (!deps.env.isOnline()) {
        set({ status: 'offline' });
        await waitForOnline(signal);
        continue;
      }
      set({ status: everOpened ? 'reconnecting' : 'connecting' });
      const outcome = await streamOnce(signal);
      if (signal.aborted) return;
      if (store.get().status === 'open') everOpened = true;
      if (outcome.kind === 'terminal') {
        set({ status: 'closed', error: { code: outcome.code, message: outcome.message } });
        return;
      }
      if (outcome.healthy) backoff.reset();
      const delay = Math.max(backoff.next(), outcome.retryAfterMs ?? 0);
      set({ status: deps.env.isOnline() ? 'reconnecting' : 'offline' });
      // Coming back to the tab or the network is a good moment to retry at once instead of waiting.
      await interruptibleSleep(delay, signal, deps.env, ['visible', 'online']);
    }
  };

  const waitForOnline = (signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      const done = () => {
        off();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const off = deps.env.on('online', done);
      signal.addEventListener('abort', done, { once: true });
      if (deps.env.isOnline()) done();
    });

  const onChannelMessage = (data: unknown) => {
    const m = data as ChannelMessage;
    if (!m || typeof m !== 'object') return;
    if (m.t === 'hello') {
      if (role === 'leader') broadcastSnapshot();
      return;
    }
    if (role !== 'follower') return;
    if (m.t === 'event') {
      if (m.event.type === 'error') {
        events.emit(m.event);
        return;
      }
      apply(m.event, m.id);
    } else if (m.t === 'snapshot') {
      loaded = loaded || m.loaded;
      store.set({ ...m.state });
    }
  };

  const begin = () => {
    if (run) return;
    const controller = new AbortController();
    run = controller;
    set({ status: 'connecting', error: null });
    if (!sharing) {
      role = 'direct';
      void connectLoop(controller.signal);
      return;
    }
    role = 'follower';
    try {
      channel = new sharing.BC(lockName);
    } catch {
      channel = null;
    }
    if (!channel) {
      role = 'direct';
      void connectLoop(controller.signal);
      return;
    }
    channel.onmessage = (ev) => onChannelMessage(ev.data);
    post({ t: 'hello' });
    sharing.locks
      .request(lockName, { signal: controller.signal }, async () => {
        if (controller.signal.aborted) return;
        // Leader: connect from the last cursor this tab saw (its own or the previous leader's events).
        role = 'leader';
        const held = new Promise<void>((resolve) => {
          releaseLock = resolve;
        });
        void connectLoop(controller.signal);
        await held;
      })
      .catch(() => {
        // Aborted while waiting (stop) — nothing to release.
      });
  };

  const end = () => {
    const controller = run;
    if (!controller) return;
    run = null;
    controller.abort();
    releaseLock?.();
    releaseLock = null;
    if (channel) {
      channel.onmessage = null;
      channel.close();
      channel = null;
    }
    role = 'direct';
    refreshGen++;
    duringRefresh = null;
    store.update({ status: 'closed' });
  };

  /** A feed ended by a gone session starts over (a new sign-in): nothing of the old session is kept. */
  const restartIfFailed = () => {
    const s = store.get();
    if (s.status !== 'closed' || !s.error) return;
    end();
    loaded = false;
    store.set({ ...initialFeedState });
  };

  const reconcile = () => {
    if (manual || holds.count > 0) begin();
    else end();
  };

  return {
    start() {
      manual = true;
      restartIfFailed();
      reconcile();
    },
    stop() {
      manual = false;
      holds.count = 0;
      reconcile();
    },
    retain() {
      const release = holds.take();
      restartIfFailed();
      reconcile();
      return release;
    },
    getState: store.get,
    subscribe: store.subscribe,
    onEvent: (l) => events.on(l),
    refresh,
  };
}
