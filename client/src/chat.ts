// The chat socket (docs/chat-protocol.md): reconnects according to the close code, keeps the message list,
// presence and typing indicators, and makes `send` resolve once the server stored the message. Every send carries a
// clientMessageId, so re-sending the unconfirmed ones after a reconnect never stores a message twice.
import { Backoff, fullJitterDelay } from './backoff.js';
import {
  ChatCloseCode,
  type ChatHistoryResponse,
  type ChatMessage,
  type ChatServerEvent,
  type PresenceCounts,
} from './contract.js';
import { type ClientEnvironment, interruptibleSleep } from './environment.js';
import type { Http } from './http.js';
import { Holds, Store } from './store.js';

/**
 * `refused`: the socket never opened and the service says it does not accept this page's origin (state.error has
 * code ORIGIN_NOT_ALLOWED and a message naming CORS_ALLOWLISTED_ORIGINS); no further reconnects until connect().
 */
export type ChatStatus = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed' | 'banned' | 'refused';

export interface ChatState {
  status: ChatStatus;
  connectionId: string | null;
  userId: string | null;
  role: 'guest' | 'member' | 'admin' | null;
  instanceId: string | null;
  /** Oldest first. */
  messages: ChatMessage[];
  /** Older messages can be loaded with loadOlder(). */
  hasMore: boolean;
  presence: PresenceCounts | null;
  typing: Array<{ userId: string; userName: string }>;
  /** Epoch ms until which sends are throttled, or null. */
  throttledUntil: number | null;
  error: { code: string; message: string } | null;
}

/** `client.chat`: the chat socket (room `general`), its messages, presence and typing indicators. */
export interface ChatClient {
  /**
   * Opens the socket (and keeps it open, reconnecting by the close codes) until disconnect().
   * @example
   * client.chat.connect();
   */
  connect(): void;
  /**
   * Closes the socket; unconfirmed sends reject with CLOSED.
   * @example
   * client.chat.disconnect();
   */
  disconnect(): void;
  /**
   * The current state: `status`, `messages` (oldest first), `presence`, `typing`, `role`, `error`.
   * @example
   * const { status, messages } = client.chat.getState();
   */
  getState(): ChatState;
  /**
   * Called on every state change; returns the unsubscribe function.
   * @example
   * const off = client.chat.subscribe((s) => render(s.messages));
   */
  subscribe(listener: (s: ChatState) => void): () => void;
  /**
   * Sends a message; resolves once the server stored it (rejects with HeraldChatError: THROTTLED, a server code…).
   * Safe to retry: the same `clientMessageId` is never stored twice.
   * @example
   * const stored = await client.chat.send('Hello!');
   */
  send(message: string, opts?: { clientMessageId?: string }): Promise<ChatMessage>;
  /**
   * Edits one's own message (admins: any).
   * @example
   * client.chat.edit(message.id, 'Hello again');
   */
  edit(messageId: string, message: string): void;
  /**
   * Deletes one's own message (admins: any).
   * @example
   * client.chat.remove(message.id);
   */
  remove(messageId: string): void;
  /**
   * Tells the room one is typing (members; throttled, and `false` goes out by itself after a pause).
   * @example
   * input.addEventListener('input', () => client.chat.setTyping(input.value !== ''));
   */
  setTyping(isTyping: boolean): void;
  /**
   * Loads the page before the oldest loaded message; resolves with how many were added.
   * @example
   * if (client.chat.getState().hasMore) await client.chat.loadOlder(50);
   */
  loadOlder(limit?: number): Promise<number>;
  /**
   * Keeps the socket open while held (reference counted, for components); the returned function releases.
   * `key` names who the holder is signed in as (a user id, null for a guest): after a ban (1008) the socket stays
   * closed for that key, and opens again for another one (another user signed in). connect() always reopens.
   * @example
   * const release = client.chat.retain(session?.user.id ?? null);
   * // later
   * release();
   */
  retain(key?: string | null): () => void;
  /**
   * For the rooms layer (rooms.ts): `frame` receives every server frame of a room other than `general` (and the
   * room-protocol frames `subscribed`, `unsubscribed`, `read`), `ready` is called after each (re)connect once the
   * socket takes frames (resubscribe there). Returns the detach function.
   */
  attach(listener: ChatFrameListener): () => void;
  /** Sends a frame on the open socket; false when it is not open (send again from `ready`). */
  sendFrame(frame: Record<string, unknown>): boolean;
}

export interface ChatFrameListener {
  frame(event: ChatServerEvent): void;
  ready(): void;
}

const ROOM_PROTOCOL = new Set(['subscribed', 'unsubscribed', 'read']);
/** A frame the rooms layer handles: scoped to a room other than general, or of the room protocol itself. */
function forRooms(event: ChatServerEvent): boolean {
  if (ROOM_PROTOCOL.has(event.type)) return true;
  const roomId = (event as { roomId?: unknown }).roomId;
  return typeof roomId === 'string' && roomId !== 'general';
}

/** The parts of a WebSocket the client uses: the browser's WebSocket and the `ws` package both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** Opens a socket to `url`. Browsers: `(url) => new WebSocket(url)` (the default); Node: `ws` with headers. */
export type WebSocketFactory = (url: string) => WebSocketLike;

/**
 * A send refused by the server (its `error` code, or THROTTLED, CLOSED, BANNED, ORIGIN_NOT_ALLOWED…).
 * @example
 * try {
 *   await client.chat.send(text);
 * } catch (e) {
 *   if (e instanceof HeraldChatError && e.code === 'THROTTLED') showSlowDown();
 * }
 */
export class HeraldChatError extends Error {
  override readonly name = 'HeraldChatError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Limits mirrored from the protocol so obviously refused frames are not sent (the server re-checks). */
const MAX_FRAME_BYTES = 16 * 1024;
const HISTORY_ON_CONNECT = 100;
const OPEN = 1;
/** 4001 closes closer together than this are backed off (the first reconnects at once). */
const SESSION_CLOSE_WINDOW_MS = 10_000;
/** How long sends wait for the history after `connected` before going out anyway. */
const HISTORY_WAIT_MS = 3000;

export interface ChatOptions {
  /** First reconnect window (ms, default 500). */
  baseDelayMs?: number;
  /** Largest reconnect window (ms, default 30000). */
  maxDelayMs?: number;
  /** Least wait after a 4029 abuse close (ms, default 15000), jitter added on top. */
  abuseDelayMs?: number;
  /** A typing indicator disappears after this long without a refresh (ms, default 6000). */
  typingTimeoutMs?: number;
  /** After setTyping(true), `typing: false` is sent by itself once no further call came for this long (ms, default 3000). */
  ownTypingTimeoutMs?: number;
}

export interface ChatDeps {
  http: Http;
  url: string;
  createSocket: WebSocketFactory;
  env: ClientEnvironment;
  random: () => number;
  /** Re-reads the session after a 4001 close; resolves true when a session exists. */
  checkSession: () => Promise<boolean>;
  uuid: () => string;
  /**
   * Asked after sockets failed to open (closed before `connected`) twice in a row: an error when the cause is known
   * and reconnecting cannot help (the page's origin is refused), null to keep reconnecting.
   */
  diagnose?: () => Promise<{ code: string; message: string } | null>;
  options?: ChatOptions;
}

type Outcome = { kind: 'send'; cmid: string } | { kind: 'edit' | 'delete'; messageId: string };

interface PendingSend {
  message: string;
  resolve: (m: ChatMessage) => void;
  reject: (e: HeraldChatError) => void;
}

export const initialChatState: ChatState = {
  status: 'idle',
  connectionId: null,
  userId: null,
  role: null,
  instanceId: null,
  messages: [],
  hasMore: false,
  presence: null,
  typing: [],
  throttledUntil: null,
  error: null,
};

const byTime = (a: ChatMessage, b: ChatMessage) =>
  a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

/**
 * The list after a (re)connect's history: messages older than the history's first one are kept (pages loaded
 * with loadOlder), the history's window is taken as the server has it now (edits and deletes while away).
 */
/**
 * @example
 * const merged = mergeHistory(state.messages, event.messages);
 */
export function mergeHistory(current: ChatMessage[], history: ChatMessage[]): ChatMessage[] {
  const sorted = [...history].sort(byTime);
  const first = sorted[0];
  if (!first) return [];
  const older = current.filter((m) => byTime(m, first) < 0 && !sorted.some((h) => h.id === m.id));
  return [...older, ...sorted];
}

export function createChatClient(deps: ChatDeps): ChatClient {
  const opts = {
    baseDelayMs: deps.options?.baseDelayMs ?? 500,
    maxDelayMs: deps.options?.maxDelayMs ?? 30_000,
    abuseDelayMs: deps.options?.abuseDelayMs ?? 15_000,
    typingTimeoutMs: deps.options?.typingTimeoutMs ?? 6000,
    ownTypingTimeoutMs: deps.options?.ownTypingTimeoutMs ?? 3000,
  };
  const store = new Store<ChatState>(initialChatState);
  const backoff = new Backoff({ baseMs: opts.baseDelayMs, capMs: opts.maxDelayMs, random: deps.random });
  const pending = new Map<string, PendingSend>();
  /** Operations sent on the current socket awaiting their result; the server answers a socket in order. */
  let outcomes: Outcome[] = [];
  const typingTimers = new Map<string, ReturnType<typeof setTimeout>>();
  let manual = false;
  // Released holds re-evaluate whether the connection should stay open.
  const holds = new Holds(() => reconcile());
  let socket: WebSocketLike | null = null;
  let run: AbortController | null = null;
  let everOpened = false;
  /** Older pages were loaded: a reconnect's history must not reset hasMore. */
  let pagedOlder = false;
  let lastTypingTrue = 0;
  let awaitingHistory = false;
  let sessionCloses = 0;
  /** Sockets closed before `connected` since the last one that got it. */
  let failedOpens = 0;
  let lastSessionClose = 0;
  let historyTimer: ReturnType<typeof setTimeout> | undefined;
  let ownTypingTimer: ReturnType<typeof setTimeout> | undefined;
  /** The holder key of the last retain(), and the key the ban applied to. */
  let currentKey: string | null | undefined;
  let bannedKey: string | null | undefined;
  const attached = new Set<ChatFrameListener>();

  const set = (patch: Partial<ChatState>) => store.update(patch);

  const transmit = (frame: Record<string, unknown>): boolean => {
    if (!socket || socket.readyState !== OPEN || store.get().status !== 'open' || awaitingHistory)
      return false;
    socket.send(JSON.stringify(frame));
    return true;
  };

  /**
   * After `connected` the server sends the history (or an `error` when it cannot): operations go out only after
   * that, so such an error is never taken for the answer to one of them.
   */
  const historyArrived = () => {
    if (!awaitingHistory) return;
    awaitingHistory = false;
    clearTimeout(historyTimer);
    // Re-send what was not confirmed; the server answers a known clientMessageId with the stored message.
    for (const [cmid, p] of pending) sendPending(cmid, p);
    for (const l of attached) l.ready();
  };

  const sendPending = (cmid: string, p: PendingSend) => {
    if (transmit({ type: 'send_message', message: p.message, clientMessageId: cmid })) {
      outcomes.push({ kind: 'send', cmid });
    }
  };

  const rejectAll = (code: string, message: string) => {
    for (const [, p] of pending) p.reject(new HeraldChatError(code, message));
    pending.clear();
    outcomes = [];
  };

  /** Removes the first outcome matching `pred` (normally the head: replies come in order). */
  const settle = (pred: (o: Outcome) => boolean) => {
    const i = outcomes.findIndex(pred);
    if (i >= 0) outcomes.splice(i, 1);
  };

  const failHead = (code: string, message: string) => {
    const head = outcomes.shift();
    if (head?.kind !== 'send') return;
    const p = pending.get(head.cmid);
    pending.delete(head.cmid);
    p?.reject(new HeraldChatError(code, message));
  };

  const clearTyping = (userId: string) => {
    clearTimeout(typingTimers.get(userId));
    typingTimers.delete(userId);
    const typing = store.get().typing;
    if (typing.some((t) => t.userId === userId)) set({ typing: typing.filter((t) => t.userId !== userId) });
  };

  const upsert = (message: ChatMessage) => {
    const messages = store.get().messages;
    const i = messages.findIndex((m) => m.id === message.id);
    if (i >= 0) {
      const next = messages.slice();
      next[i] = message;
      set({ messages: next });
    } else {
      const last = messages[messages.length - 1];
      // Usually the newest: append; otherwise keep the order.
      const next = [...messages, message];
      if (last && byTime(last, message) > 0) next.sort(byTime);
      set({ messages: next });
    }
  };

  const onEvent = (event: ChatServerEvent) => {
    if (forRooms(event)) {
      for (const l of attached) l.frame(event);
      return;
    }
    switch (event.type) {
      case 'connected':
        backoff.reset();
        everOpened = true;
        failedOpens = 0;
        set({
          status: 'open',
          connectionId: event.connectionId,
          userId: event.userId,
          role: event.role,
          instanceId: event.instanceId,
          error: null,
        });
        outcomes = [];
        awaitingHistory = true;
        // The protocol always sends the history; should it not come, do not hold the sends forever.
        clearTimeout(historyTimer);
        historyTimer = setTimeout(historyArrived, HISTORY_WAIT_MS);
        return;
      case 'message_history': {
        const messages = mergeHistory(store.get().messages, event.messages);
        set({
          messages,
          hasMore: pagedOlder ? store.get().hasMore : event.messages.length >= HISTORY_ON_CONNECT,
        });
        historyArrived();
        return;
      }
      case 'new_message': {
        upsert(event.message);
        const cmid = event.message.clientMessageId;
        if (cmid !== undefined && event.message.userId === store.get().userId) {
          settle((o) => o.kind === 'send' && o.cmid === cmid);
          const p = pending.get(cmid);
          if (p) {
            pending.delete(cmid);
            p.resolve(event.message);
          }
        }
        return;
      }
      case 'message_updated':
        upsert(event.message);
        settle((o) => o.kind === 'edit' && o.messageId === event.message.id);
        return;
      case 'message_deleted':
        set({ messages: store.get().messages.filter((m) => m.id !== event.messageId) });
        settle((o) => o.kind === 'delete' && o.messageId === event.messageId);
        return;
      case 'messages_purged':
        set({ messages: store.get().messages.filter((m) => m.userId !== event.userId) });
        return;
      case 'presence':
        if ('guests' in event) {
          set({ presence: { guests: event.guests, members: event.members, admins: event.admins } });
        }
        return;
      case 'typing': {
        if (!event.isTyping) return clearTyping(event.userId);
        clearTimeout(typingTimers.get(event.userId));
        typingTimers.set(
          event.userId,
          setTimeout(() => clearTyping(event.userId), opts.typingTimeoutMs),
        );
        const typing = store.get().typing.filter((t) => t.userId !== event.userId);
        set({ typing: [...typing, { userId: event.userId, userName: event.userName }] });
        return;
      }
      case 'user_disconnected':
        clearTyping(event.userId);
        return;
      case 'throttled':
        set({ throttledUntil: Date.now() + event.retryAfterMs });
        failHead('THROTTLED', `Too many messages; retry in ${Math.ceil(event.retryAfterMs / 1000)} s`);
        return;
      case 'error':
        set({ error: { code: event.code, message: event.message } });
        // The history's own failure (sent in place of message_history) answers no operation.
        if (awaitingHistory) historyArrived();
        else failHead(event.code, event.message);
        return;
      case 'pong':
        return;
    }
  };

  const open = (signal: AbortSignal) => {
    if (signal.aborted) return;
    set({ status: everOpened ? 'reconnecting' : 'connecting' });
    let ws: WebSocketLike;
    try {
      ws = deps.createSocket(deps.url);
    } catch (err) {
      set({ error: { code: 'CONNECT_FAILED', message: (err as Error).message } });
      void retryAfter(backoff.next(), signal);
      return;
    }
    socket = ws;
    ws.onmessage = (ev) => {
      if (socket !== ws || typeof ev.data !== 'string') return;
      let event: ChatServerEvent;
      try {
        event = JSON.parse(ev.data) as ChatServerEvent;
      } catch {
        return;
      }
      if (event && typeof event === 'object' && typeof event.type === 'string') onEvent(event);
    };
    ws.onerror = () => {
      // Always followed by onclose, which decides.
    };
    ws.onclose = (ev) => {
      if (socket !== ws) return;
      if (store.get().connectionId === null) failedOpens++;
      socket = null;
      outcomes = [];
      awaitingHistory = false;
      clearTimeout(historyTimer);
      for (const userId of [...typingTimers.keys()]) clearTyping(userId);
      void onClose(ev.code, ev.reason ?? '', signal);
    };
  };

  const retryAfter = async (delay: number, signal: AbortSignal) => {
    if (!deps.env.isOnline()) await waitOnline(signal);
    else await interruptibleSleep(delay, signal, deps.env, ['online', 'visible']);
    open(signal);
  };

  const waitOnline = (signal: AbortSignal) => interruptibleSleep(2 ** 31 - 1, signal, deps.env, ['online']);

  const onClose = async (code: number, reason: string, signal: AbortSignal) => {
    if (signal.aborted) return;
    set({ connectionId: null });
    if (failedOpens >= 2 && failedOpens % 2 === 0 && deps.diagnose) {
      const refusal = await deps.diagnose().catch(() => null);
      if (signal.aborted) return;
      if (refusal) {
        set({ status: 'refused', error: refusal });
        rejectAll(refusal.code, refusal.message);
        stopRun();
        return;
      }
    }
    switch (code) {
      case ChatCloseCode.POLICY:
        if (/slow consumer/i.test(reason)) break; // not a sanction: reconnect and reload the history
        bannedKey = currentKey;
        set({
          status: 'banned',
          error: { code: 'BANNED', message: reason || 'The server closed the chat (policy)' },
        });
        rejectAll('BANNED', reason || 'Closed by policy');
        stopRun();
        return;
      case ChatCloseCode.SESSION_ENDED: {
        // The session ended (or the account changed): reconnect at once, as a member if a session still
        // exists (the cookie was refreshed), otherwise as a guest, whose sends cannot succeed.
        // Another 4001 soon after the last one is no longer a one-off: back off instead of looping.
        const now = Date.now();
        sessionCloses = now - lastSessionClose < SESSION_CLOSE_WINDOW_MS ? sessionCloses + 1 : 0;
        lastSessionClose = now;
        set({ status: 'reconnecting' });
        const hasSession = await deps.checkSession().catch(() => false);
        if (signal.aborted) return;
        if (!hasSession) rejectAll('UNAUTHORIZED', 'The session ended');
        if (sessionCloses === 0) open(signal);
        else {
          const delay = fullJitterDelay(sessionCloses, {
            baseMs: opts.baseDelayMs,
            capMs: opts.maxDelayMs,
            random: deps.random,
          });
          void retryAfter(delay, signal);
        }
        return;
      }
      case ChatCloseCode.ABUSE:
        set({
          status: 'reconnecting',
          error: { code: 'ABUSE', message: reason || 'Too many invalid requests' },
        });
        return retryAfter(opts.abuseDelayMs + backoff.next(), signal);
      case ChatCloseCode.TOO_BIG:
        set({ error: { code: 'TOO_BIG', message: 'A frame was larger than the server accepts' } });
        break;
      default:
        break;
    }
    set({ status: 'reconnecting' });
    return retryAfter(backoff.next(), signal);
  };

  function setTyping(isTyping: boolean): void {
    const role = store.get().role;
    if (role !== 'member' && role !== 'admin') return;
    clearTimeout(ownTypingTimer);
    if (!isTyping) {
      if (lastTypingTrue === 0) return; // nothing to take back
      lastTypingTrue = 0;
      transmit({ type: 'typing', isTyping: false });
      return;
    }
    // Someone who stops typing without sending still stops "typing" for the others.
    ownTypingTimer = setTimeout(() => setTyping(false), opts.ownTypingTimeoutMs);
    // The server forwards `true` at most once a second; sending more only costs frames.
    const now = Date.now();
    if (now - lastTypingTrue < 1000) return;
    lastTypingTrue = now;
    transmit({ type: 'typing', isTyping: true });
  }

  const stopRun = () => {
    clearTimeout(historyTimer);
    awaitingHistory = false;
    clearTimeout(ownTypingTimer);
    lastTypingTrue = 0;
    run?.abort();
    run = null;
    const ws = socket;
    socket = null;
    if (ws) {
      ws.onclose = null;
      ws.onmessage = null;
      try {
        ws.close(1000, 'client closed');
      } catch {
        // Already closing.
      }
    }
  };

  const begin = () => {
    if (run) return;
    if (store.get().status === 'banned') {
      // Banned users are not reconnected; another user (a new sign-in) is.
      if (currentKey === bannedKey) return;
      set({ status: 'idle', error: null });
    }
    run = new AbortController();
    open(run.signal);
  };

  const end = () => {
    if (!run) return;
    stopRun();
    for (const userId of [...typingTimers.keys()]) clearTyping(userId);
    rejectAll('CLOSED', 'The chat was disconnected');
    set({ status: 'closed', connectionId: null });
  };

  const reconcile = () => {
    if (manual || holds.count > 0) begin();
    else end();
  };

  return {
    connect() {
      manual = true;
      const status = store.get().status;
      if (status === 'banned' || status === 'refused') set({ status: 'idle', error: null });
      failedOpens = 0;
      reconcile();
    },
    disconnect() {
      manual = false;
      holds.count = 0;
      reconcile();
    },
    retain(key) {
      if (key !== undefined) currentKey = key;
      const release = holds.take();
      reconcile();
      return release;
    },
    getState: store.get,
    subscribe: store.subscribe,
    attach(listener) {
      attached.add(listener);
      return () => {
        attached.delete(listener);
      };
    },
    sendFrame: (frame) => transmit(frame),
    send(message, sendOpts) {
      const cmid = sendOpts?.clientMessageId ?? deps.uuid();
      return new Promise<ChatMessage>((resolve, reject) => {
        const frame = JSON.stringify({ type: 'send_message', message, clientMessageId: cmid });
        if (new TextEncoder().encode(frame).length > MAX_FRAME_BYTES) {
          reject(new HeraldChatError('MESSAGE_TOO_LONG', 'The message is larger than a chat frame'));
          return;
        }
        if (pending.has(cmid)) {
          reject(new HeraldChatError('DUPLICATE_SEND', 'A send with this clientMessageId is in progress'));
          return;
        }
        const p: PendingSend = { message, resolve, reject };
        pending.set(cmid, p);
        // Not open yet: sent once `connected` arrives.
        sendPending(cmid, p);
      });
    },
    edit(messageId, message) {
      if (transmit({ type: 'edit_message', messageId, message })) outcomes.push({ kind: 'edit', messageId });
    },
    remove(messageId) {
      if (transmit({ type: 'delete_message', messageId })) outcomes.push({ kind: 'delete', messageId });
    },
    setTyping,
    async loadOlder(limit = 50) {
      const oldest = store.get().messages[0];
      const res = await deps.http.request<ChatHistoryResponse>('GET', '/chat/history', {
        query: { limit, before: oldest?.id },
      });
      const known = new Set(store.get().messages.map((m) => m.id));
      const older = res.messages.filter((m) => !known.has(m.id));
      pagedOlder = true;
      set({
        messages: [...older, ...store.get().messages].sort(byTime),
        hasMore: res.messages.length >= limit,
      });
      return older.length;
    },
  };
}
