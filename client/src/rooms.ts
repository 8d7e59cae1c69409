// Chat rooms and direct messages (§6.1, docs/chat-protocol.md "Rooms"): the HTTP calls (`chat.rooms.*`) and live
// state over the chat socket. A room's live state resumes exactly: after every reconnect it resubscribes with the
// last seq and revision it applied, so the server replays what was missed (edits and deletions included) before
// any live frame; a seq gap seen live (a lost frame) resubscribes the same way; a `resync` reloads the newest page.
import type { ChatClient } from './chat.js';
import type {
  ChatMemberRemovedResponse,
  ChatReadResponse,
  ChatRoom,
  ChatRoomDetailResponse,
  ChatRoomMessagesResponse,
  ChatRoomResponse,
  ChatRoomsResponse,
  ChatServerEvent,
  RoomMessage,
} from './contract.js';
import type { Http } from './http.js';
import { Holds, Store } from './store.js';

export interface LiveRoomState {
  roomId: string;
  /** idle: not followed; loading: first page on its way; live: following; removed: no longer a member. */
  status: 'idle' | 'loading' | 'live' | 'removed' | 'error';
  /** Oldest first (by seq). */
  messages: RoomMessage[];
  /** Older messages exist (loadOlder()). */
  hasMore: boolean;
  /** The highest seq this client has seen (a message or a deletion). */
  lastSeq: number;
  /** Members with a socket on the room, cluster-wide; `userIds` when the server lists them. */
  presence: { online: number; userIds?: string[] } | null;
  typing: Array<{ userId: string; userName: string }>;
  /** Read positions received (`read` frames: the other members of direct and private rooms, and my devices). */
  reads: Record<string, number>;
  error: { code: string; message: string } | null;
}

export interface LiveRoom {
  readonly roomId: string;
  getState(): LiveRoomState;
  subscribe(listener: (s: LiveRoomState) => void): () => void;
  /** Follows the room while held (reference counted); the returned function releases. */
  retain(): () => void;
  /** Resolves with the stored message; safe to retry across reconnects (clientMessageId). */
  send(message: string, opts?: { clientMessageId?: string }): Promise<RoomMessage>;
  edit(messageId: string, message: string): void;
  remove(messageId: string): void;
  setTyping(isTyping: boolean): void;
  /** Stores my read position (default: the newest message held). */
  markRead(seq?: number): void;
  loadOlder(limit?: number): Promise<number>;
}

export interface RoomListState {
  status: 'idle' | 'loading' | 'ready' | 'error';
  /** My rooms, most recent activity first, with lastReadSeq and unreadCount kept current by live frames. */
  rooms: ChatRoom[];
  error: { code: string; message: string } | null;
}

export interface RoomList {
  getState(): RoomListState;
  subscribe(listener: (s: RoomListState) => void): () => void;
  /** Keeps the list current while held: loads it, follows up to `follow` rooms live for their unread counts. */
  retain(): () => void;
  refresh(): Promise<void>;
}

export interface RoomsApi {
  /**
   * @example const rooms = await client.chat.rooms.list(); // mine, most recent first
   * @example const open = await client.chat.rooms.list('public');
   */
  list(scope?: 'mine' | 'public'): Promise<ChatRoom[]>;
  /** @example const room = await client.chat.rooms.create({ name: 'Design', kind: 'private', memberIds: [bobId] }); */
  create(input: { name: string; kind: 'public' | 'private'; memberIds?: string[] }): Promise<ChatRoom>;
  /** @example const { room, members } = await client.chat.rooms.get(roomId); */
  get(roomId: string): Promise<ChatRoomDetailResponse>;
  /** @example await client.chat.rooms.join(roomId); // public rooms */
  join(roomId: string): Promise<ChatRoom>;
  /** @example await client.chat.rooms.addMembers(roomId, [carolId]); // owner or admin */
  addMembers(roomId: string, userIds: string[]): Promise<ChatRoom>;
  /** @example await client.chat.rooms.removeMember(roomId, carolId); // owner or admin */
  removeMember(roomId: string, userId: string): Promise<ChatMemberRemovedResponse>;
  /** @example await client.chat.rooms.leave(roomId); */
  leave(roomId: string): Promise<ChatMemberRemovedResponse>;
  /** The one direct room with that user (created on first use). @example const dm = await client.chat.rooms.direct(bobId); */
  direct(userId: string): Promise<ChatRoom>;
  /** @example const { messages, hasMore } = await client.chat.rooms.messages(roomId, { before: 120, limit: 50 }); */
  messages(
    roomId: string,
    query?: { before?: number; after?: number; limit?: number },
  ): Promise<ChatRoomMessagesResponse>;
  /** @example await client.chat.rooms.markRead(roomId, lastSeq); */
  markRead(roomId: string, seq: number): Promise<ChatReadResponse>;
  /** The live state of one room (one object per room id). @example const room = client.chat.rooms.room(id); room.retain(); */
  room(roomId: string): LiveRoom;
  /** My rooms, kept current. @example const list = client.chat.rooms.roomList(); list.retain(); */
  roomList(): RoomList;
}

export interface RoomsDeps {
  http: Http;
  chat: ChatClient;
  uuid: () => string;
  /** A typing indicator disappears after this long without a refresh (ms). */
  typingTimeoutMs?: number;
  /** Rooms the room list follows live for their unread counts (default 50; the server allows 200 per socket). */
  followLimit?: number;
}

const PAGE = 50;

type RoomFrame = Extract<ChatServerEvent, { roomId?: string }>;

interface PendingSend {
  message: string;
  resolve: (m: RoomMessage) => void;
  reject: (e: Error) => void;
}

/** A room operation the server refused (its `error` code). */
export class HeraldRoomError extends Error {
  override readonly name = 'HeraldRoomError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const bySeq = (a: RoomMessage, b: RoomMessage) => a.seq - b.seq;

/** Merges messages by id (the later copy wins), ordered by seq. */
export function mergeRoomMessages(current: RoomMessage[], incoming: RoomMessage[]): RoomMessage[] {
  const byId = new Map(current.map((m) => [m.id, m]));
  for (const m of incoming) byId.set(m.id, m);
  return [...byId.values()].sort(bySeq);
}

export function createRooms(deps: RoomsDeps): RoomsApi {
  const { http, chat } = deps;
  const typingTimeoutMs = deps.typingTimeoutMs ?? 6000;
  const enc = encodeURIComponent;
  const api = {
    list: async (scope: 'mine' | 'public' = 'mine') =>
      (await http.request<ChatRoomsResponse>('GET', '/chat/rooms', { query: { scope } })).rooms,
    create: async (input: { name: string; kind: 'public' | 'private'; memberIds?: string[] }) =>
      (await http.request<ChatRoomResponse>('POST', '/chat/rooms', { body: input })).room,
    get: (roomId: string) => http.request<ChatRoomDetailResponse>('GET', `/chat/rooms/${enc(roomId)}`),
    join: async (roomId: string) =>
      (await http.request<ChatRoomResponse>('POST', `/chat/rooms/${enc(roomId)}/join`)).room,
    addMembers: async (roomId: string, userIds: string[]) =>
      (
        await http.request<ChatRoomResponse>('POST', `/chat/rooms/${enc(roomId)}/members`, {
          body: { userIds },
        })
      ).room,
    removeMember: (roomId: string, userId: string) =>
      http.request<ChatMemberRemovedResponse>('DELETE', `/chat/rooms/${enc(roomId)}/members/${enc(userId)}`),
    async leave(roomId: string) {
      const me =
        chat.getState().userId ??
        (await http.request<{ user?: { id: string } } | null>('GET', '/auth/get-session'))?.user?.id;
      if (!me) throw new HeraldRoomError('UNAUTHORIZED', 'Sign in to leave a room');
      return api.removeMember(roomId, me);
    },
    direct: async (userId: string) =>
      (await http.request<ChatRoomResponse>('POST', '/chat/direct', { body: { userId } })).room,
    messages: (roomId: string, query: { before?: number; after?: number; limit?: number } = {}) =>
      http.request<ChatRoomMessagesResponse>('GET', `/chat/rooms/${enc(roomId)}/messages`, { query }),
    markRead: (roomId: string, seq: number) =>
      http.request<ChatReadResponse>('POST', `/chat/rooms/${enc(roomId)}/read`, { body: { seq } }),
  };

  // ---------------------------------------------------------------------------------------------------------
  // Subscriptions: one `subscribe` per room however many holders (a room view, the room list) follow it.

  interface Follow {
    count: number;
    /** The exact resume cursor once known (null: subscribe without replay). */
    cursor: () => { sinceSeq: number; sinceRev: number } | null;
  }
  const follows = new Map<string, Follow>();
  const frameHandlers = new Set<(e: RoomFrame) => void>();
  const subscribeFrame = (roomId: string) => {
    const f = follows.get(roomId);
    const cursor = f?.cursor() ?? null;
    chat.sendFrame({ type: 'subscribe', roomId, ...(cursor ?? {}) });
  };
  let releaseChat: (() => void) | null = null;
  let detach: (() => void) | null = null;
  const follow = (roomId: string, cursor: Follow['cursor']) => {
    const f = follows.get(roomId);
    if (f) {
      f.count++;
      // Subscribing again gives the new holder its own `subscribed` (the server re-registers). A holder that knows
      // no cursor (the room list) must not hide the room's own: resubscribing without one after a reconnect would
      // skip the replay of what was missed.
      const before = f.cursor;
      f.cursor = () => cursor() ?? before();
    } else follows.set(roomId, { count: 1, cursor });
    subscribeFrame(roomId);
    if (!detach) {
      detach = chat.attach({
        frame: (event) => {
          for (const h of frameHandlers) h(event as RoomFrame);
        },
        ready: () => {
          for (const id of follows.keys()) subscribeFrame(id);
          for (const room of rooms.values()) room.onReady();
        },
      });
      releaseChat = chat.retain();
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const cur = follows.get(roomId);
      if (!cur) return;
      cur.count--;
      if (cur.count > 0) return;
      follows.delete(roomId);
      chat.sendFrame({ type: 'unsubscribe', roomId });
      if (follows.size === 0) {
        detach?.();
        detach = null;
        releaseChat?.();
        releaseChat = null;
      }
    };
  };

  // ---------------------------------------------------------------------------------------------------------
  // One room's live state.

  interface RoomInternal extends LiveRoom {
    onReady(): void;
  }
  const rooms = new Map<string, RoomInternal>();

  const createLiveRoom = (roomId: string): RoomInternal => {
    const store = new Store<LiveRoomState>({
      roomId,
      status: 'idle',
      messages: [],
      hasMore: false,
      lastSeq: 0,
      presence: null,
      typing: [],
      reads: {},
      error: null,
    });
    const set = (patch: Partial<LiveRoomState>) => store.update(patch);
    const pending = new Map<string, PendingSend>();
    const typingTimers = new Map<string, ReturnType<typeof setTimeout>>();
    /** The last revision applied; null until the first `subscribed` gave a baseline. */
    let rev: number | null = null;
    /** Replayed frames still to come after a `subscribed`: seq gaps inside a replay are expected. */
    let replaying = 0;
    /** A subscribe is on its way: no second one for a gap seen meanwhile. */
    let resubscribing = false;
    let loads = 0;
    let lastTypingTrue = 0;
    let unfollow: (() => void) | null = null;
    const holds = new Holds(() => {
      if (holds.count > 0) return;
      unfollow?.();
      unfollow = null;
      set({ status: 'idle' });
    });

    const cursor = () => (rev === null ? null : { sinceSeq: store.get().lastSeq, sinceRev: rev });

    const loadNewest = async () => {
      const mine = ++loads;
      try {
        const page = await api.messages(roomId, { limit: PAGE });
        if (mine !== loads) return;
        const last = page.messages[page.messages.length - 1];
        set({
          messages: mergeRoomMessages(
            // A resync replaces the window: what the server no longer has is gone.
            store.get().messages.filter((m) => (last ? m.seq > last.seq : false)),
            page.messages,
          ),
          hasMore: page.hasMore,
          lastSeq: Math.max(store.get().lastSeq, last?.seq ?? 0),
          status: 'live',
        });
      } catch (err) {
        if (mine === loads)
          set({ status: 'error', error: { code: 'LOAD_FAILED', message: (err as Error).message } });
      }
    };

    const resubscribe = () => {
      if (resubscribing) return;
      resubscribing = true;
      chat.sendFrame({ type: 'subscribe', roomId, ...(cursor() ?? {}) });
    };

    const clearTyping = (userId: string) => {
      clearTimeout(typingTimers.get(userId));
      typingTimers.delete(userId);
      const typing = store.get().typing;
      if (typing.some((t) => t.userId === userId)) set({ typing: typing.filter((t) => t.userId !== userId) });
    };

    const sendPending = (cmid: string, p: PendingSend) =>
      chat.sendFrame({ type: 'send_message', roomId, message: p.message, clientMessageId: cmid });

    const apply = (event: RoomFrame) => {
      switch (event.type) {
        case 'subscribed': {
          resubscribing = false;
          const first = rev === null;
          if (first || event.resync) {
            rev = event.rev;
            replaying = 0;
            set({ lastSeq: Math.max(event.lastSeq, first ? 0 : store.get().lastSeq), error: null });
            if (event.resync) set({ messages: [], lastSeq: event.lastSeq });
            set({ status: 'loading' });
            void loadNewest();
          } else {
            replaying = event.replayed;
            set({ status: 'live', error: null });
          }
          return;
        }
        case 'new_message':
        case 'message_updated':
        case 'message_deleted': {
          const frameRev = event.rev;
          if (rev !== null && frameRev !== undefined && frameRev <= rev) return; // seen already
          if (event.type === 'new_message') {
            const seq = (event.message as RoomMessage).seq;
            if (replaying === 0 && rev !== null && seq > store.get().lastSeq + 1) {
              // A frame went missing: ask for everything after what we hold (this one included).
              resubscribe();
              return;
            }
          }
          if (frameRev !== undefined) rev = frameRev;
          if (replaying > 0) replaying--;
          if (event.type === 'message_deleted') {
            set({
              messages: store.get().messages.filter((m) => m.id !== event.messageId),
              lastSeq: Math.max(store.get().lastSeq, event.seq ?? 0),
            });
            return;
          }
          const message = event.message as RoomMessage;
          if (event.type === 'new_message' || store.get().messages.some((m) => m.id === message.id)) {
            set({
              messages: mergeRoomMessages(store.get().messages, [message]),
              lastSeq: Math.max(store.get().lastSeq, message.seq),
            });
          }
          const cmid = message.clientMessageId;
          if (
            event.type === 'new_message' &&
            cmid !== undefined &&
            message.userId === chat.getState().userId
          ) {
            const p = pending.get(cmid);
            pending.delete(cmid);
            p?.resolve(message);
          }
          return;
        }
        case 'presence':
          if ('online' in event) set({ presence: { online: event.online, userIds: event.userIds } });
          return;
        case 'typing': {
          if (!event.isTyping) return clearTyping(event.userId);
          clearTimeout(typingTimers.get(event.userId));
          typingTimers.set(
            event.userId,
            setTimeout(() => clearTyping(event.userId), typingTimeoutMs),
          );
          const typing = store.get().typing.filter((t) => t.userId !== event.userId);
          set({ typing: [...typing, { userId: event.userId, userName: event.userName }] });
          return;
        }
        case 'read':
          set({ reads: { ...store.get().reads, [event.userId]: event.seq } });
          return;
        case 'unsubscribed':
          if (event.reason === 'removed') {
            set({
              status: 'removed',
              error: { code: 'NOT_FOUND', message: 'You are no longer a member of this room' },
            });
            for (const [, p] of pending)
              p.reject(new HeraldRoomError('NOT_FOUND', 'Not a member of this room'));
            pending.clear();
          }
          return;
        case 'error':
          resubscribing = false;
          set({ error: { code: event.code, message: event.message } });
          if (event.code === 'NOT_FOUND') {
            set({ status: 'error' });
            for (const [, p] of pending) p.reject(new HeraldRoomError(event.code, event.message));
            pending.clear();
          }
          return;
        default:
          return;
      }
    };
    frameHandlers.add((e) => {
      if (e.roomId === roomId) apply(e);
    });

    const room: RoomInternal = {
      roomId,
      getState: store.get,
      subscribe: store.subscribe,
      retain() {
        const release = holds.take();
        if (!unfollow) {
          unfollow = follow(roomId, cursor);
          if (store.get().status === 'idle') set({ status: 'loading' });
        }
        return release;
      },
      onReady() {
        resubscribing = false;
        if (!unfollow) return;
        for (const [cmid, p] of pending) sendPending(cmid, p);
      },
      send(message, opts) {
        const cmid = opts?.clientMessageId ?? deps.uuid();
        return new Promise<RoomMessage>((resolve, reject) => {
          if (pending.has(cmid)) {
            reject(new HeraldRoomError('DUPLICATE_SEND', 'A send with this clientMessageId is in progress'));
            return;
          }
          const p = { message, resolve, reject };
          pending.set(cmid, p);
          // Not open: sent from onReady after the (re)connect.
          sendPending(cmid, p);
        });
      },
      edit(messageId, message) {
        chat.sendFrame({ type: 'edit_message', roomId, messageId, message });
      },
      remove(messageId) {
        chat.sendFrame({ type: 'delete_message', roomId, messageId });
      },
      setTyping(isTyping) {
        const now = Date.now();
        if (isTyping && now - lastTypingTrue < 1000) return;
        lastTypingTrue = isTyping ? now : 0;
        chat.sendFrame({ type: 'typing', roomId, isTyping });
      },
      markRead(seq) {
        const target =
          seq ?? store.get().messages[store.get().messages.length - 1]?.seq ?? store.get().lastSeq;
        if (target > 0) chat.sendFrame({ type: 'mark_read', roomId, seq: target });
      },
      async loadOlder(limit = PAGE) {
        const oldest = store.get().messages[0];
        const page = await api.messages(roomId, { limit, ...(oldest ? { before: oldest.seq } : {}) });
        const known = new Set(store.get().messages.map((m) => m.id));
        const older = page.messages.filter((m) => !known.has(m.id));
        set({ messages: mergeRoomMessages(store.get().messages, older), hasMore: page.hasMore });
        return older.length;
      },
    };
    return room;
  };

  const room = (roomId: string): LiveRoom => {
    let r = rooms.get(roomId);
    if (!r) {
      r = createLiveRoom(roomId);
      rooms.set(roomId, r);
    }
    return r;
  };

  // ---------------------------------------------------------------------------------------------------------
  // My rooms, kept current.

  let list: RoomList | undefined;
  const roomList = (): RoomList => {
    if (list) return list;
    const store = new Store<RoomListState>({ status: 'idle', rooms: [], error: null });
    const set = (patch: Partial<RoomListState>) => store.update(patch);
    let followed = new Map<string, () => void>();
    const limit = deps.followLimit ?? 50;
    let holders = 0;

    const refollow = () => {
      const want = new Set(
        holders > 0
          ? store
              .get()
              .rooms.slice(0, limit)
              .map((r) => r.id)
          : [],
      );
      const next = new Map<string, () => void>();
      for (const [id, off] of followed) {
        if (want.has(id)) next.set(id, off);
        else off();
      }
      for (const id of want)
        if (!next.has(id))
          next.set(
            id,
            follow(id, () => null),
          );
      followed = next;
    };

    const patchRoom = (roomId: string, fn: (r: ChatRoom) => ChatRoom) => {
      const rooms = store.get().rooms;
      const i = rooms.findIndex((r) => r.id === roomId);
      if (i < 0) return;
      const next = rooms.slice();
      next[i] = fn(rooms[i] as ChatRoom);
      // Most recent activity first.
      next.sort((x, y) =>
        (y.lastMessageAt ?? y.createdAt) > (x.lastMessageAt ?? x.createdAt)
          ? 1
          : (y.lastMessageAt ?? y.createdAt) < (x.lastMessageAt ?? x.createdAt)
            ? -1
            : 0,
      );
      set({ rooms: next });
    };

    frameHandlers.add((e) => {
      if (!e.roomId) return;
      const me = chat.getState().userId;
      if (e.type === 'new_message') {
        const m = e.message as RoomMessage;
        patchRoom(e.roomId as string, (r) => {
          if (m.seq <= r.lastSeq) return r;
          const unread = m.userId !== me && m.seq > (r.lastReadSeq ?? 0) ? 1 : 0;
          return {
            ...r,
            lastSeq: m.seq,
            lastMessageAt: m.createdAt,
            unreadCount: (r.unreadCount ?? 0) + unread,
          };
        });
      } else if (e.type === 'read' && e.userId === me) {
        patchRoom(e.roomId as string, (r) => {
          if (e.seq <= (r.lastReadSeq ?? 0)) return r;
          // Exact after a refresh; meanwhile, messages after the new position are at most what is left.
          const unreadCount = Math.min(r.unreadCount ?? 0, Math.max(0, r.lastSeq - e.seq));
          return { ...r, lastReadSeq: e.seq, unreadCount };
        });
      }
    });

    const refresh = async () => {
      if (store.get().status === 'idle') set({ status: 'loading' });
      try {
        set({ rooms: await api.list('mine'), status: 'ready', error: null });
        refollow();
      } catch (err) {
        set({ status: 'error', error: { code: 'LOAD_FAILED', message: (err as Error).message } });
      }
    };
    let offReady: (() => void) | null = null;

    list = {
      getState: store.get,
      subscribe: store.subscribe,
      refresh,
      retain() {
        holders++;
        if (holders === 1) {
          // Reconnects may have missed messages of rooms not followed: counts come from the server again.
          offReady = chat.attach({ frame: () => {}, ready: () => void refresh() });
          void refresh();
        }
        let done = false;
        return () => {
          if (done) return;
          done = true;
          holders--;
          if (holders === 0) {
            offReady?.();
            offReady = null;
            refollow();
          }
        };
      },
    };
    return list;
  };

  return { ...api, room, roomList };
}
