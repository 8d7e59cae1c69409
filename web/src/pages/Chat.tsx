// The chat room: history with scroll-back (older pages load at the top), presence, typing, editing and deleting
// one's own messages; admins may delete any message and purge a user's messages. Guests read along.
import type { ChatMessage } from '@herald/client';
import { useChat, useHeraldClient } from '@herald/client/react';
import { type FormEvent, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { errorMessage, formatTime, plural } from '../format';
import { Link } from '../router';
import { useCurrentUser } from '../session';

const MAX_LENGTH = 400;
const TYPING_IDLE_MS = 3_000;

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

  const save = (event: FormEvent) => {
    event.preventDefault();
    const text = draft.trim();
    if (text && text !== message.message) onEdit(text);
    setEditing(false);
  };

  return (
    <li className={own ? 'message own' : 'message'} data-testid="chat-message">
      <div className="message-head">
        <strong>{message.userName}</strong>
        <time dateTime={message.createdAt}>{formatTime(message.createdAt)}</time>
        {message.editedAt ? <span className="muted">(edited)</span> : null}
      </div>
      {editing ? (
        <form className="message-edit" onSubmit={save}>
          <label className="sr-only" htmlFor={`edit-${message.id}`}>
            Edit message
          </label>
          <input
            id={`edit-${message.id}`}
            value={draft}
            maxLength={MAX_LENGTH}
            onChange={(e) => setDraft(e.target.value)}
            // biome-ignore lint/a11y/noAutofocus: the field appears because the user asked to edit
            autoFocus
          />
          <button type="submit" className="button small">
            Save
          </button>
          <button type="button" className="button small secondary" onClick={() => setEditing(false)}>
            Cancel
          </button>
        </form>
      ) : (
        <p className="message-text">{message.message}</p>
      )}
      {(own || isAdmin) && !editing ? (
        <div className="message-actions">
          {own ? (
            <button
              type="button"
              className="button small link"
              onClick={() => {
                setDraft(message.message);
                setEditing(true);
              }}
            >
              Edit
            </button>
          ) : null}
          <button type="button" className="button small link danger" onClick={onDelete}>
            Delete
          </button>
          {isAdmin && !own ? (
            confirmPurge ? (
              <>
                <button type="button" className="button small danger" onClick={onPurge}>
                  Delete all by {message.userName}
                </button>
                <button type="button" className="button small link" onClick={() => setConfirmPurge(false)}>
                  Cancel
                </button>
              </>
            ) : (
              <button
                type="button"
                className="button small link danger"
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

export function ChatPage() {
  const client = useHeraldClient();
  const state = useChat();
  const { chat, messages, hasMore, presence, typing, role, userId, status, throttledUntil } = state;
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const listRef = useRef<HTMLOListElement>(null);
  const stickToBottom = useRef(true);
  const restoreFrom = useRef<number | null>(null);
  const typingTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const isTyping = useRef(false);
  const { refetch } = useCurrentUser();
  const canSend = role === 'member' || role === 'admin';
  // Banned or signed out elsewhere: the socket was closed for it; the session is gone too.
  useEffect(() => {
    if (status === 'banned') refetch();
  }, [status, refetch]);
  const isAdmin = role === 'admin';

  // Keep the view where the reader is: at the bottom for new messages, at the same message after loading
  // older ones above.
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

  return (
    <section className="chat">
      <div className="page-title">
        <h1>Chat</h1>
        <p className="muted" aria-live="polite">
          {presence
            ? `${plural(presence.members + presence.admins, 'member')} and ${plural(presence.guests, 'guest')} online`
            : ''}
          {status !== 'open' ? ` · ${status === 'banned' ? 'you are banned from the chat' : status}` : ''}
        </p>
      </div>
      <ol
        className="messages"
        ref={listRef}
        onScroll={onScroll}
        role="log"
        aria-label="Messages"
        aria-live="polite"
      >
        {hasMore ? (
          <li className="load-older">
            <button
              type="button"
              className="button small secondary"
              disabled={loadingOlder}
              onClick={() => void loadOlder()}
            >
              {loadingOlder ? 'Loading…' : 'Load older messages'}
            </button>
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
      <p className="typing muted" aria-live="polite">
        {others.length === 1
          ? `${others[0]?.userName} is typing…`
          : others.length > 1
            ? `${others.length} people are typing…`
            : '\u00a0'}
      </p>
      {error ? (
        <p role="alert" className="error">
          {error}
        </p>
      ) : null}
      {throttled ? (
        <p role="status" className="error">
          Slow down: you are sending too fast.
        </p>
      ) : null}
      {canSend ? (
        <form className="composer" onSubmit={(e) => void send(e)}>
          <label htmlFor="chat-message" className="sr-only">
            Message
          </label>
          <input
            id="chat-message"
            value={text}
            maxLength={MAX_LENGTH}
            autoComplete="off"
            placeholder="Write a message"
            onChange={(e) => onInput(e.target.value)}
          />
          <button type="submit" className="button" disabled={text.trim() === ''}>
            Send
          </button>
        </form>
      ) : role === 'guest' ? (
        <p className="muted">
          You are reading as a guest. <Link to="/sign-in?next=%2Fchat">Sign in</Link> to write.
        </p>
      ) : null}
    </section>
  );
}
