// A chat room: history with scroll-back (older pages load at the top), send, edit and delete one's own messages,
// typing indicators and presence; admins may delete any message and purge a user's messages. Guests read along.
// Accessible names of CONTRACT §10: the input is labelled `Message`, the button is `Send`.
import { type FormEvent, type ReactNode, useEffect, useId, useLayoutEffect, useRef, useState } from 'react';
import type { ChatMessage } from '../contract.js';
import { useChat, useHeraldClient } from '../hooks.js';
import { cx, errorMessage, formatTime, plural } from './format.js';

/** The protocol's limit on a message (CONTRACT §6). */
const MAX_LENGTH = 400;
const TYPING_IDLE_MS = 3_000;
/** The room every socket is in; the only one this SDK's chat client addresses (rooms: CONTRACT §6.1). */
export const GENERAL_ROOM = 'general';

export interface ChatRoomProps {
  /**
   * The room (default `general`). This SDK's chat client speaks to `general` only (frames without `roomId`, which
   * CONTRACT §6.1 defines as `general`); another id renders a notice instead of the wrong room.
   */
  roomId?: string;
  /** The room's heading (default 'Chat'); null renders none. */
  title?: string | null;
  /** Level of the heading (default 2). */
  headingLevel?: 1 | 2 | 3 | 4;
  /** Shown to guests (no session) in place of the composer, e.g. a sign-in link. */
  guestNotice?: ReactNode;
  /** Shown when the room has no messages (default: an invitation to write the first one). */
  emptyState?: ReactNode;
  /** Called once the socket was closed because the user is banned or their session ended (e.g. refetch the session). */
  onSessionEnded?: () => void;
  className?: string;
}

function MessageItem({
  message,
  own,
  isAdmin,
  onEdit,
  onDelete,
  onPurge,
}: {
  message: ChatMessage;
  own: boolean;
  isAdmin: boolean;
  onEdit: (text: string) => void;
  onDelete: () => void;
  onPurge: () => void;
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
        <strong>{message.userName}</strong>
        <time dateTime={message.createdAt}>{formatTime(message.createdAt)}</time>
        {message.editedAt ? <span className="herald-muted">(edited)</span> : null}
      </div>
      {editing ? (
        <form className="herald-message-edit" onSubmit={save}>
          <label className="herald-sr-only" htmlFor={editId}>
            Edit message
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
            Save
          </button>
          <button
            type="button"
            className="herald-button herald-small herald-secondary"
            onClick={() => setEditing(false)}
          >
            Cancel
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
              Edit
            </button>
          ) : null}
          <button
            type="button"
            className="herald-button herald-small herald-link herald-danger"
            onClick={onDelete}
          >
            Delete
          </button>
          {isAdmin && !own ? (
            confirmPurge ? (
              <>
                <button type="button" className="herald-button herald-small herald-danger" onClick={onPurge}>
                  Delete all by {message.userName}
                </button>
                <button
                  type="button"
                  className="herald-button herald-small herald-link"
                  onClick={() => setConfirmPurge(false)}
                >
                  Cancel
                </button>
              </>
            ) : (
              <button
                type="button"
                className="herald-button herald-small herald-link herald-danger"
                onClick={() => setConfirmPurge(true)}
              >
                Purge user
              </button>
            )
          ) : null}
        </div>
      ) : null}
    </li>
  );
}

/**
 * A complete chat room over the SDK's chat socket; render it inside `<HeraldProvider>` (guests read, members write).
 *
 * @example
 * import { ChatRoom, HeraldProvider } from '@herald/client/react';
 * import '@herald/client/styles.css';
 *
 * <HeraldProvider client={client}>
 *   <ChatRoom roomId="general" guestNotice={<a href="/sign-in">Sign in to write</a>} />
 * </HeraldProvider>
 */
export function ChatRoom(props: ChatRoomProps) {
  const roomId = props.roomId ?? GENERAL_ROOM;
  if (roomId !== GENERAL_ROOM) {
    return (
      <section
        className={cx('herald', 'herald-chat', props.className)}
        aria-label="Chat"
        data-room-id={roomId}
      >
        <p role="alert" className="herald-error">
          This version of @herald/client can open the room “{GENERAL_ROOM}” only, not “{roomId}”.
        </p>
      </section>
    );
  }
  return <GeneralRoom {...props} roomId={roomId} />;
}

function GeneralRoom({
  roomId,
  title = 'Chat',
  headingLevel = 2,
  guestNotice,
  emptyState,
  onSessionEnded,
  className,
}: ChatRoomProps & { roomId: string }) {
  const client = useHeraldClient();
  const {
    chat,
    messages,
    hasMore,
    presence,
    typing,
    role,
    userId,
    status,
    throttledUntil,
    error: chatError,
  } = useChat();
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const listRef = useRef<HTMLOListElement>(null);
  const stickToBottom = useRef(true);
  const restoreFrom = useRef<number | null>(null);
  const typingTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const isTyping = useRef(false);
  const inputId = useId();
  const canSend = role === 'member' || role === 'admin';
  const isAdmin = role === 'admin';
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

  const loadOlder = async () => {
    const list = listRef.current;
    if (loadingOlder || !hasMore || !list) return;
    setLoadingOlder(true);
    restoreFrom.current = list.scrollHeight - list.scrollTop;
    try {
      await chat.loadOlder(50);
    } catch (err) {
      restoreFrom.current = null;
      setError(errorMessage(err, 'Could not load older messages'));
    } finally {
      setLoadingOlder(false);
    }
  };

  const onScroll = () => {
    const list = listRef.current;
    if (!list) return;
    stickToBottom.current = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    if (list.scrollTop < 20) void loadOlder();
  };

  const stopTyping = () => {
    clearTimeout(typingTimer.current);
    if (isTyping.current) {
      isTyping.current = false;
      chat.setTyping(false);
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
      chat.setTyping(true);
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
      await chat.send(message);
    } catch (err) {
      setText((current) => current || message);
      setError(errorMessage(err, 'Could not send'));
    }
  };

  const purge = async (target: string) => {
    setError(null);
    try {
      await client.admin.purgeMessages(target);
    } catch (err) {
      setError(errorMessage(err, 'Could not purge'));
    }
  };

  const others = typing.filter((t) => t.userId !== userId);
  const throttled = throttledUntil !== null && throttledUntil > Date.now();
  const connecting = status === 'connecting' || status === 'reconnecting' || status === 'idle';

  return (
    <section
      className={cx('herald', 'herald-chat', className)}
      aria-label={title ? undefined : 'Chat'}
      data-room-id={roomId}
    >
      <div className="herald-chat-head">
        {title ? <Heading className="herald-title">{title}</Heading> : null}
        <p className="herald-muted" aria-live="polite">
          {presence
            ? `${plural(presence.members + presence.admins, 'member')} and ${plural(presence.guests, 'guest')} online`
            : ''}
          {status !== 'open' ? ` · ${status === 'banned' ? 'you are banned from the chat' : status}` : ''}
        </p>
      </div>
      <ol
        className="herald-messages"
        ref={listRef}
        onScroll={onScroll}
        role="log"
        aria-label="Messages"
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
              {loadingOlder ? 'Loading…' : 'Load older messages'}
            </button>
          </li>
        ) : null}
        {messages.length === 0 ? (
          <li className="herald-empty" data-testid="chat-empty">
            {connecting
              ? 'Loading messages…'
              : (emptyState ?? (canSend ? 'No messages yet. Say hello!' : 'No messages yet.'))}
          </li>
        ) : null}
        {messages.map((m) => (
          <MessageItem
            key={m.id}
            message={m}
            own={m.userId === userId}
            isAdmin={isAdmin}
            onEdit={(t) => chat.edit(m.id, t)}
            onDelete={() => chat.remove(m.id)}
            onPurge={() => void purge(m.userId)}
          />
        ))}
      </ol>
      <p className="herald-typing herald-muted" aria-live="polite">
        {others.length === 1
          ? `${others[0]?.userName} is typing…`
          : others.length > 1
            ? `${others.length} people are typing…`
            : '\u00a0'}
      </p>
      {error ? (
        <p role="alert" className="herald-error">
          {error}
        </p>
      ) : chatError && status !== 'open' ? (
        <p role="alert" className="herald-error">
          {chatError.message}
        </p>
      ) : null}
      {throttled ? (
        <p role="status" className="herald-error">
          Slow down: you are sending too fast.
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
            placeholder="Write a message"
            onChange={(e) => onInput(e.target.value)}
          />
          <button type="submit" className="herald-button" disabled={text.trim() === ''}>
            Send
          </button>
        </form>
      ) : role === 'guest' ? (
        <p className="herald-muted">{guestNotice ?? 'You are reading as a guest: sign in to write.'}</p>
      ) : null}
    </section>
  );
}
