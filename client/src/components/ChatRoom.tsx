// A chat room: history with scroll-back (older pages load at the top), send, edit and delete one's own messages,
// typing indicators and presence; admins may delete any message and purge a user's messages. Guests read along.
// `general` runs on the chat client (§6); any other room on the SDK's live room state (§6.1: per-room history and
// exact resume), with read receipts in direct rooms. Both mark what the reader has seen as read.
// Accessible names of CONTRACT §10: the input is labelled `Message`, the button is `Send` — in every language, so
// they are not among the `texts` (the button shows its name, which must stay in it: WCAG 2.5.3).
import { type FormEvent, type ReactNode, useEffect, useId, useLayoutEffect, useRef, useState } from 'react';
import type { ChatState } from '../chat.js';
import type { ChatMessage, ChatRoomDetailResponse, RoomMessage } from '../contract.js';
import { useChat, useHeraldClient, useRoom } from '../hooks.js';
import { cx, errorMessage, formatTime, plural } from './format.js';

/** The protocol's limit on a message (CONTRACT §6). */
const MAX_LENGTH = 400;
const TYPING_IDLE_MS = 3_000;
/** The room every socket is in (CONTRACT §6.1). */
export const GENERAL_ROOM = 'general';

/**
 * Every text the room shows or names a control with, but the input's `Message` and the button's `Send` (fixed by
 * CONTRACT §10 in every language). Functions get the values the text carries.
 */
export interface ChatRoomTexts {
  /** `general`'s heading (and any room's until its name is known); the region's name when there is no heading. */
  title: string;
  /** The message log's name. */
  messages: string;
  /** `general`'s presence line. */
  presence: (members: number, guests: number) => string;
  /** Another room's presence line. */
  roomPresence: (online: number) => string;
  /** Shown after the presence while the socket is not open (nothing before it was started). */
  status: Record<'connecting' | 'reconnecting' | 'closed' | 'banned' | 'refused', string>;
  loadOlder: string;
  loadingOlder: string;
  loadingMessages: string;
  /** The empty room, to a reader who may write (`empty` to one who may not), unless the app gives `emptyState`. */
  emptyInvite: string;
  empty: string;
  typing: (name: string) => string;
  typingMany: (count: number) => string;
  throttled: string;
  placeholder: string;
  /** To a guest, unless the app gives a `guestNotice`. */
  guest: string;
  /** A public room I am not in. */
  join: (room: string) => string;
  /** A member's name as a button that opens a direct conversation. */
  direct: (name: string) => string;
  edited: string;
  /** The field while editing a message. */
  editLabel: string;
  save: string;
  cancel: string;
  edit: string;
  delete: string;
  purge: string;
  purgeConfirm: (name: string) => string;
  /** Under my newest message the other member of a direct room has read. */
  seen: string;
  /**
   * Shown for a failure whose error carries no message of its own (the SDK's errors always carry the service's,
   * which is shown as it came).
   */
  failed: string;
}

/** The chat room's English texts, the default. */
export const defaultChatRoomTexts: ChatRoomTexts = {
  title: 'Chat',
  messages: 'Messages',
  presence: (members, guests) => `${plural(members, 'member')} and ${plural(guests, 'guest')} online`,
  roomPresence: (online) => `${plural(online, 'member')} online`,
  status: {
    connecting: 'connecting',
    reconnecting: 'reconnecting',
    closed: 'closed',
    banned: 'you are banned from the chat',
    refused: 'refused',
  },
  loadOlder: 'Load older messages',
  loadingOlder: 'Loading…',
  loadingMessages: 'Loading messages…',
  emptyInvite: 'No messages yet. Say hello!',
  empty: 'No messages yet.',
  typing: (name) => `${name} is typing…`,
  typingMany: (n) => `${n} people are typing…`,
  throttled: 'Slow down: you are sending too fast.',
  placeholder: 'Write a message',
  guest: 'You are reading as a guest: sign in to write.',
  join: (room) => `Join ${room}`,
  direct: (name) => `Start a direct message with ${name}`,
  edited: '(edited)',
  editLabel: 'Edit message',
  save: 'Save',
  cancel: 'Cancel',
  edit: 'Edit',
  delete: 'Delete',
  purge: 'Purge user',
  purgeConfirm: (name) => `Delete all by ${name}`,
  seen: 'Seen',
  failed: 'Something went wrong',
};

export interface ChatRoomProps {
  /** The room (default `general`): `general`, or the id of a room or direct conversation (`chat.rooms`). */
  roomId?: string;
  /** The room's heading (default `texts.title`, 'Chat', for `general`, the room's name otherwise); null renders none. */
  title?: string | null;
  /** Level of the heading (default 2). */
  headingLevel?: 1 | 2 | 3 | 4;
  /** Shown to guests (no session) in place of the composer, e.g. a sign-in link. */
  guestNotice?: ReactNode;
  /** Shown when the room has no messages (default: an invitation to write the first one). */
  emptyState?: ReactNode;
  /** Called once the socket was closed because the user is banned or their session ended (e.g. refetch the session). */
  onSessionEnded?: () => void;
  /**
   * Opens a room in the app (e.g. navigates to it). Given, another member's name in a message is a button that
   * starts (or reopens) a direct conversation with them and passes its room id here.
   */
  onOpenRoom?: (roomId: string) => void;
  /** Texts to use instead of the English defaults (`defaultChatRoomTexts`), e.g. a translation. */
  texts?: Partial<ChatRoomTexts>;
  /** The language times are shown in (a BCP 47 tag such as `de`; default: the browser's). */
  locale?: string;
  className?: string;
}

function MessageItem({
  message,
  own,
  isAdmin,
  onEdit,
  onDelete,
  onPurge,
  onDirect,
  seen,
  t,
  locale,
}: {
  message: ChatMessage;
  own: boolean;
  isAdmin: boolean;
  onEdit: (text: string) => void;
  onDelete: () => void;
  onPurge: () => void;
  onDirect?: () => void;
  /** The other member of a direct room has read up to this message (the newest of mine they read). */
  seen: boolean;
  t: ChatRoomTexts;
  locale?: string;
}) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(message.message);
  const [confirmPurge, setConfirmPurge] = useState(false);
  const editId = useId();

  const save = (event: FormEvent) => {
    event.preventDefault();
    const text = draft.trim();
    if (text && text !== message.message) onEdit(text);
    setEditing(false);
  };

  return (
    <li className={cx('herald-message', own && 'herald-own')} data-testid="chat-message">
      <div className="herald-message-head">
        {onDirect ? (
          <button
            type="button"
            className="herald-button herald-small herald-link"
            aria-label={t.direct(message.userName)}
            onClick={onDirect}
          >
            <strong>{message.userName}</strong>
          </button>
        ) : (
          <strong>{message.userName}</strong>
        )}
        <time dateTime={message.createdAt}>{formatTime(message.createdAt, locale)}</time>
        {message.editedAt ? <span className="herald-muted">{t.edited}</span> : null}
      </div>
      {editing ? (
        <form className="herald-message-edit" onSubmit={save}>
          <label className="herald-sr-only" htmlFor={editId}>
            {t.editLabel}
          </label>
          <input
            id={editId}
            value={draft}
            maxLength={MAX_LENGTH}
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === 'Escape') setEditing(false);
            }}
            // biome-ignore lint/a11y/noAutofocus: the field appears because the user asked to edit
            autoFocus
          />
          <button type="submit" className="herald-button herald-small">
            {t.save}
          </button>
          <button
            type="button"
            className="herald-button herald-small herald-secondary"
            onClick={() => setEditing(false)}
          >
            {t.cancel}
          </button>
        </form>
      ) : (
        <p className="herald-message-text">{message.message}</p>
      )}
      {(own || isAdmin) && !editing ? (
        <div className="herald-message-actions">
          {own ? (
            <button
              type="button"
              className="herald-button herald-small herald-link"
              onClick={() => {
                setDraft(message.message);
                setEditing(true);
              }}
            >
              {t.edit}
            </button>
          ) : null}
          <button
            type="button"
            className="herald-button herald-small herald-link herald-danger"
            onClick={onDelete}
          >
            {t.delete}
          </button>
          {isAdmin && !own ? (
            confirmPurge ? (
              <>
                <button type="button" className="herald-button herald-small herald-danger" onClick={onPurge}>
                  {t.purgeConfirm(message.userName)}
                </button>
                <button
                  type="button"
                  className="herald-button herald-small herald-link"
                  onClick={() => setConfirmPurge(false)}
                >
                  {t.cancel}
                </button>
              </>
            ) : (
              <button
                type="button"
                className="herald-button herald-small herald-link herald-danger"
                onClick={() => setConfirmPurge(true)}
              >
                {t.purge}
              </button>
            )
          ) : null}
        </div>
      ) : null}
      {seen ? <p className="herald-seen">{t.seen}</p> : null}
    </li>
  );
}

/** What a room view shows and does, from the chat client (`general`) or a room's live state (any other room). */
interface RoomSource {
  messages: ChatMessage[];
  hasMore: boolean;
  loadOlder(): Promise<unknown>;
  send(message: string): Promise<unknown>;
  edit(messageId: string, message: string): void;
  remove(messageId: string): void;
  setTyping(isTyping: boolean): void;
  /** Stores my read position; absent where nothing is to be marked (guests, non-members). */
  markRead?: (seq: number) => void;
  presence: string;
  typing: Array<{ userId: string; userName: string }>;
  loading: boolean;
  /** The room may be written to by me (the chat role aside). */
  member: boolean;
  title: string;
  error: string | null;
  /** The other member's read position in a direct room. */
  seenSeq?: number;
  direct?: boolean;
  /** In place of the composer, e.g. a Join button for a public room I am not in. */
  notice?: ReactNode;
}

/**
 * A complete chat room over the SDK's chat socket; render it inside `<HeraldProvider>` (guests read `general`,
 * members write). Any room id works: `general`, a public or private room, a direct conversation.
 *
 * @example
 * import { ChatRoom, HeraldProvider } from '@herald/client/react';
 * import '@herald/client/styles.css';
 *
 * <HeraldProvider client={client}>
 *   <ChatRoom roomId="general" guestNotice={<a href="/sign-in">Sign in to write</a>} />
 *   <ChatRoom roomId={roomId} onOpenRoom={(id) => navigate(`/chat?room=${id}`)} />
 * </HeraldProvider>
 */
export function ChatRoom(props: ChatRoomProps) {
  const roomId = props.roomId ?? GENERAL_ROOM;
  const t = { ...defaultChatRoomTexts, ...props.texts };
  // Keyed: another room is another view (scroll position, drafts and read marks do not carry over).
  return roomId === GENERAL_ROOM ? (
    <GeneralRoom {...props} roomId={roomId} t={t} />
  ) : (
    <LiveRoomView key={roomId} {...props} roomId={roomId} t={t} />
  );
}

/** The room, its texts merged with the defaults. */
type ViewProps = ChatRoomProps & { roomId: string; t: ChatRoomTexts };

function GeneralRoom(props: ViewProps) {
  const { t } = props;
  const c = useChat();
  const { chat } = c;
  const presence = c.presence;
  const source: RoomSource = {
    messages: c.messages,
    hasMore: c.hasMore,
    loadOlder: () => chat.loadOlder(50),
    send: (m) => chat.send(m),
    edit: chat.edit,
    remove: chat.remove,
    setTyping: chat.setTyping,
    // Messages carry `seq` only once the socket speaks the rooms dialect (§6.1, e.g. a room list is shown): then
    // general's read position matters for its unread badge; a §6-only page keeps sending what it always sent.
    markRead: (seq) => chat.sendFrame({ type: 'mark_read', roomId: GENERAL_ROOM, seq }),
    presence: presence ? t.presence(presence.members + presence.admins, presence.guests) : '',
    typing: c.typing,
    loading: false,
    member: true,
    title: t.title,
    error: null,
  };
  return <RoomView {...props} c={c} s={source} />;
}

function LiveRoomView(props: ViewProps) {
  const { roomId, t } = props;
  const client = useHeraldClient();
  const c = useChat();
  const r = useRoom(roomId);
  const { room } = r;
  const [detail, setDetail] = useState<ChatRoomDetailResponse | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  const me = c.userId;

  // The room's kind, name, my membership and the members' read positions (receipts start from them).
  // biome-ignore lint/correctness/useExhaustiveDependencies: `version` reloads after joining
  useEffect(() => {
    if (!me) return;
    let live = true;
    client.chat.rooms.get(roomId).then(
      (d) => live && setDetail(d),
      (err) => live && setLoadError(errorMessage(err, t.failed)),
    );
    return () => {
      live = false;
    };
  }, [client, roomId, me, version]);

  const info = detail?.room;
  // Removed meanwhile (left on another device, or by the owner): read-only from then on.
  const member = info?.role !== undefined && r.status !== 'removed';
  const other = info?.kind === 'direct' ? detail?.members.find((m) => m.userId !== me) : undefined;
  const join = async () => {
    try {
      await client.chat.rooms.join(roomId);
      void client.chat.rooms.roomList().refresh();
      setVersion((v) => v + 1);
    } catch (err) {
      setLoadError(errorMessage(err, t.failed));
    }
  };
  const source: RoomSource = {
    messages: r.messages,
    hasMore: r.hasMore,
    loadOlder: () => room.loadOlder(50),
    send: (m) => room.send(m),
    edit: room.edit,
    remove: room.remove,
    setTyping: room.setTyping,
    markRead: member ? room.markRead : undefined,
    presence: r.presence ? t.roomPresence(r.presence.online) : '',
    typing: r.typing,
    loading: r.status === 'loading' || r.status === 'idle',
    member,
    title: info?.name ?? t.title,
    error: r.error?.message ?? loadError,
    seenSeq: other ? Math.max(other.lastReadSeq, r.reads[other.userId] ?? 0) : undefined,
    direct: info?.kind === 'direct',
    notice:
      info && !member && info.kind === 'public' ? (
        <button type="button" className="herald-button" onClick={() => void join()}>
          {t.join(info.name)}
        </button>
      ) : undefined,
  };
  return <RoomView {...props} c={c} s={source} />;
}

function RoomView({
  roomId,
  title,
  headingLevel = 2,
  guestNotice,
  emptyState,
  onSessionEnded,
  onOpenRoom,
  locale,
  className,
  t,
  c,
  s,
}: ViewProps & { c: ChatState; s: RoomSource }) {
  const client = useHeraldClient();
  const { messages, hasMore, typing } = s;
  const { role, userId, status, throttledUntil, error: chatError } = c;
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const listRef = useRef<HTMLOListElement>(null);
  const stickToBottom = useRef(true);
  const restoreFrom = useRef<number | null>(null);
  const typingTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const isTyping = useRef(false);
  const marked = useRef(0);
  const inputId = useId();
  const canSend = (role === 'member' || role === 'admin') && s.member;
  const isAdmin = role === 'admin';
  const heading = title === undefined ? s.title : title;
  const Heading = `h${headingLevel}` as 'h2';

  const ended = useRef(onSessionEnded);
  ended.current = onSessionEnded;
  useEffect(() => {
    if (status === 'banned') ended.current?.();
  }, [status]);

  // Keep the view where the reader is: at the bottom for new messages, at the same message after loading older
  // ones above.
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs after each change of the message list
  useLayoutEffect(() => {
    const list = listRef.current;
    if (!list) return;
    if (restoreFrom.current !== null) {
      list.scrollTop = list.scrollHeight - restoreFrom.current;
      restoreFrom.current = null;
    } else if (stickToBottom.current) list.scrollTop = list.scrollHeight;
  }, [messages]);

  // Read = shown: the newest message is on screen (the view is at the bottom) in a visible page.
  const markSeen = useRef(() => {});
  markSeen.current = () => {
    const seq = (messages[messages.length - 1] as Partial<RoomMessage> | undefined)?.seq;
    if (!s.markRead || !canSend || typeof seq !== 'number' || seq <= marked.current) return;
    if (!stickToBottom.current || document.visibilityState === 'hidden') return;
    marked.current = seq;
    s.markRead(seq);
  };
  useEffect(() => markSeen.current());
  useEffect(() => {
    const onVisible = () => markSeen.current();
    document.addEventListener('visibilitychange', onVisible);
    return () => document.removeEventListener('visibilitychange', onVisible);
  }, []);

  const loadOlder = async () => {
    const list = listRef.current;
    if (loadingOlder || !hasMore || !list) return;
    setLoadingOlder(true);
    restoreFrom.current = list.scrollHeight - list.scrollTop;
    try {
      await s.loadOlder();
    } catch (err) {
      restoreFrom.current = null;
      setError(errorMessage(err, t.failed));
    } finally {
      setLoadingOlder(false);
    }
  };

  const onScroll = () => {
    const list = listRef.current;
    if (!list) return;
    stickToBottom.current = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    if (list.scrollTop < 20) void loadOlder();
    markSeen.current();
  };

  const stopTyping = () => {
    clearTimeout(typingTimer.current);
    if (isTyping.current) {
      isTyping.current = false;
      s.setTyping(false);
    }
  };
  useEffect(() => () => clearTimeout(typingTimer.current), []);

  const onInput = (value: string) => {
    setText(value);
    if (!canSend) return;
    if (value === '') {
      stopTyping();
      return;
    }
    if (!isTyping.current) {
      isTyping.current = true;
      s.setTyping(true);
    }
    clearTimeout(typingTimer.current);
    typingTimer.current = setTimeout(stopTyping, TYPING_IDLE_MS);
  };

  const send = async (event: FormEvent) => {
    event.preventDefault();
    const message = text.trim();
    if (!message) return;
    setError(null);
    setText('');
    stopTyping();
    stickToBottom.current = true;
    try {
      await s.send(message);
    } catch (err) {
      setText((current) => current || message);
      setError(errorMessage(err, t.failed));
    }
  };

  const act = async (work: () => Promise<unknown>) => {
    setError(null);
    try {
      await work();
    } catch (err) {
      setError(errorMessage(err, t.failed));
    }
  };
  const purge = (target: string) => act(() => client.admin.purgeMessages(target));
  const openDirect = (target: string) =>
    act(async () => {
      const room = await client.chat.rooms.direct(target);
      // The room list (if one is shown) learns of the conversation now rather than at its next reload.
      void client.chat.rooms.roomList().refresh();
      onOpenRoom?.(room.id);
    });

  // The newest of my messages the other member of a direct room has read.
  let seenId: string | undefined;
  if (s.seenSeq)
    for (const m of messages as Array<Partial<RoomMessage>>)
      if (m.userId === userId && (m.seq ?? Infinity) <= s.seenSeq) seenId = m.id;

  const others = typing.filter((t) => t.userId !== userId);
  const throttled = throttledUntil !== null && throttledUntil > Date.now();
  const connecting = status === 'connecting' || status === 'reconnecting' || status === 'idle' || s.loading;
  const shownError = error ?? s.error;

  return (
    <section
      className={cx('herald', 'herald-chat', className)}
      aria-label={heading ? undefined : t.title}
      data-room-id={roomId}
    >
      <div className="herald-chat-head">
        {heading ? <Heading className="herald-title">{heading}</Heading> : null}
        <p className="herald-muted" aria-live="polite">
          {s.presence}
          {status !== 'open' && status !== 'idle' ? ` · ${t.status[status]}` : ''}
        </p>
      </div>
      <ol
        className="herald-messages"
        ref={listRef}
        onScroll={onScroll}
        role="log"
        aria-label={t.messages}
        aria-live="polite"
        // Scrollable: reachable with the keyboard to scroll back.
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be focusable to scroll by keys
        tabIndex={0}
      >
        {hasMore ? (
          <li className="herald-load-older">
            <button
              type="button"
              className="herald-button herald-small herald-secondary"
              disabled={loadingOlder}
              onClick={() => void loadOlder()}
            >
              {loadingOlder ? t.loadingOlder : t.loadOlder}
            </button>
          </li>
        ) : null}
        {messages.length === 0 ? (
          <li className="herald-empty" data-testid="chat-empty">
            {connecting ? t.loadingMessages : (emptyState ?? (canSend ? t.emptyInvite : t.empty))}
          </li>
        ) : null}
        {messages.map((m) => (
          <MessageItem
            key={m.id}
            message={m}
            own={m.userId === userId}
            isAdmin={isAdmin}
            onEdit={(t) => s.edit(m.id, t)}
            onDelete={() => s.remove(m.id)}
            onPurge={() => void purge(m.userId)}
            onDirect={
              onOpenRoom && canSend && !s.direct && m.userId !== userId
                ? () => void openDirect(m.userId)
                : undefined
            }
            seen={m.id === seenId}
            t={t}
            locale={locale}
          />
        ))}
      </ol>
      <p className="herald-typing herald-muted" aria-live="polite">
        {others.length === 1
          ? t.typing(others[0]?.userName ?? '')
          : others.length > 1
            ? t.typingMany(others.length)
            : '\u00a0'}
      </p>
      {shownError ? (
        <p role="alert" className="herald-error">
          {shownError}
        </p>
      ) : chatError && status !== 'open' ? (
        <p role="alert" className="herald-error">
          {chatError.message}
        </p>
      ) : null}
      {throttled ? (
        <p role="status" className="herald-error">
          {t.throttled}
        </p>
      ) : null}
      {canSend ? (
        <form className="herald-composer" onSubmit={(e) => void send(e)}>
          <label htmlFor={inputId} className="herald-sr-only">
            Message
          </label>
          <input
            id={inputId}
            value={text}
            maxLength={MAX_LENGTH}
            autoComplete="off"
            placeholder={t.placeholder}
            onChange={(e) => onInput(e.target.value)}
          />
          <button type="submit" className="herald-button" disabled={text.trim() === ''}>
            Send
          </button>
        </form>
      ) : role === 'guest' ? (
        <p className="herald-muted">{guestNotice ?? t.guest}</p>
      ) : (
        (s.notice ?? null)
      )}
    </section>
  );
}
