// The inbox: filters (all/read/unread, type, search), pages, and per-item actions. The list is the server's
// answer to the current query; any live event from the feed (a new notification, a change made in another tab
// or device, a resync after a reconnect) refetches it, so what is shown is always what the server holds.
import type { ListResponse, Notification, NotificationMetadata } from '@herald/client';
import { useNotifications } from '@herald/client/react';
import { type FormEvent, useCallback, useEffect, useRef, useState } from 'react';
import { errorMessage, formatTime, plural } from '../format';
import { NOTIFICATION_TYPES, typeLabel } from '../types';

type Filter = 'all' | 'read' | 'unread';
const PAGE_SIZE = 20;
const REFETCH_ON = new Set([
  'connected',
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
]);

function Actions({ notification }: { notification: Notification }) {
  // The stored metadata was validated against the metadata schema when the notification was created.
  const actions = (notification.metadata as NotificationMetadata | undefined)?.actions ?? [];
  if (actions.length === 0) return null;
  return (
    <div className="item-links">
      {actions.map((a) => (
        <a
          key={a.actionId}
          href={a.url}
          className={`button small ${a.variant === 'destructive' ? 'danger' : 'secondary'}`}
          target={a.openInNewTab ? '_blank' : undefined}
          rel={a.openInNewTab ? 'noopener noreferrer' : undefined}
        >
          {a.label}
        </a>
      ))}
    </div>
  );
}

function Priority({ notification }: { notification: Notification }) {
  const priority = (notification.metadata as NotificationMetadata | undefined)?.priority;
  if (priority !== 'high' && priority !== 'urgent') return null;
  return <span className="tag tag-warning">{priority}</span>;
}

export function NotificationsPage() {
  const { api, feed, unreadCount, status } = useNotifications();
  const [filter, setFilter] = useState<Filter>('all');
  const [type, setType] = useState('');
  const [searchInput, setSearchInput] = useState('');
  const [search, setSearch] = useState('');
  const [page, setPage] = useState(1);
  const [data, setData] = useState<ListResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirmClear, setConfirmClear] = useState(false);
  const request = useRef(0);

  const load = useCallback(async () => {
    const id = ++request.current;
    try {
      const result = await api.list({
        page,
        limit: PAGE_SIZE,
        filter,
        ...(type ? { type: type as Notification['type'] } : {}),
        ...(search ? { search } : {}),
      });
      // Only the latest request may update the page (answers can arrive out of order).
      if (id !== request.current) return;
      setData(result);
      setError(null);
      if (result.pagination.totalPages > 0 && page > result.pagination.totalPages) {
        setPage(result.pagination.totalPages);
      }
    } catch (err) {
      if (id === request.current) setError(errorMessage(err, 'Could not load notifications'));
    }
  }, [api, page, filter, type, search]);

  useEffect(() => {
    void load();
  }, [load]);

  // Refetch on live changes; a burst of events (a replay after reconnecting) costs one request. Only events that
  // change what the server holds (and `connected`, after which a resync may have happened) count; an `error` event
  // ends the stream (e.g. the session ended) and must not send requests that can only fail.
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const off = feed.onEvent((event) => {
      if (!REFETCH_ON.has(event.type)) return;
      clearTimeout(timer);
      timer = setTimeout(() => {
        if (feed.getState().status !== 'closed') void load();
      }, 120);
    });
    return () => {
      off();
      clearTimeout(timer);
    };
  }, [feed, load]);
  // Back online (or reconnected): the feed resumes; refetch in case nothing was missed but time passed.
  useEffect(() => {
    if (status === 'open') void load();
  }, [status, load]);

  const act = async (work: () => Promise<unknown>) => {
    setError(null);
    try {
      await work();
    } catch (err) {
      setError(errorMessage(err));
    }
    await load();
  };

  const submitSearch = (event: FormEvent) => {
    event.preventDefault();
    setPage(1);
    setSearch(searchInput.trim());
  };

  const items = data?.notifications ?? [];
  const pagination = data?.pagination;

  return (
    <section className="stack">
      <div className="page-title">
        <h1>Notifications</h1>
        <p className="muted" aria-live="polite">
          {unreadCount === null ? '' : `${plural(unreadCount, 'unread notification')}`}
          {status !== 'open' && status !== 'idle' ? ` · ${status}` : ''}
        </p>
      </div>

      <div className="toolbar">
        <fieldset className="segmented" aria-label="Show">
          {(['all', 'unread', 'read'] as const).map((f) => (
            <button
              key={f}
              type="button"
              aria-pressed={filter === f}
              onClick={() => {
                setFilter(f);
                setPage(1);
              }}
            >
              {f === 'all' ? 'All' : f === 'unread' ? 'Unread' : 'Read'}
            </button>
          ))}
        </fieldset>
        <label className="inline-field">
          <span>Filter by type</span>
          <select
            value={type}
            onChange={(e) => {
              setType(e.target.value);
              setPage(1);
            }}
          >
            <option value="">All types</option>
            {NOTIFICATION_TYPES.map((t) => (
              <option key={t} value={t}>
                {typeLabel(t)}
              </option>
            ))}
          </select>
        </label>
        <search>
          <form className="search" onSubmit={submitSearch}>
            <label className="inline-field">
              <span>Search</span>
              <input
                type="search"
                value={searchInput}
                onChange={(e) => setSearchInput(e.target.value)}
                maxLength={200}
              />
            </label>
            <button type="submit" className="button secondary">
              Go
            </button>
          </form>
        </search>
      </div>

      <div className="toolbar">
        <button
          type="button"
          className="button secondary"
          disabled={!unreadCount}
          onClick={() => void act(() => api.markAllRead())}
        >
          Mark all read
        </button>
        {confirmClear ? (
          <>
            <button
              type="button"
              className="button danger"
              onClick={() => {
                setConfirmClear(false);
                void act(() => api.removeAll());
              }}
            >
              Yes, delete all
            </button>
            <button type="button" className="button secondary" onClick={() => setConfirmClear(false)}>
              Cancel
            </button>
          </>
        ) : (
          <button
            type="button"
            className="button secondary"
            disabled={!pagination || pagination.totalCount === 0}
            onClick={() => setConfirmClear(true)}
          >
            Delete all
          </button>
        )}
      </div>

      {error ? (
        <p role="alert" className="error">
          {error}
        </p>
      ) : null}

      {data === null ? (
        <p className="muted">Loading…</p>
      ) : items.length === 0 ? (
        <p className="empty">
          {search || type || filter !== 'all' ? 'No notifications match.' : 'No notifications yet.'}
        </p>
      ) : (
        <ul className="list" aria-label="Notifications list">
          {items.map((n) => (
            <li key={n.id} className={n.read ? 'item' : 'item unread'} data-testid="notification-item">
              <div className="item-head">
                <span className={`tag tag-${n.type}`}>{typeLabel(n.type)}</span>
                <Priority notification={n} />
                <time dateTime={n.createdAt}>{formatTime(n.createdAt)}</time>
              </div>
              <h2 className="item-title">
                {n.read ? null : <span className="sr-only">Unread: </span>}
                {n.title}
              </h2>
              <p className="item-content">{n.content}</p>
              <Actions notification={n} />
              <div className="item-actions">
                <button
                  type="button"
                  className="button small secondary"
                  onClick={() => void act(() => api.setRead(n.id, !n.read))}
                  aria-label={`${n.read ? 'Mark unread' : 'Mark read'}: ${n.title}`}
                >
                  {n.read ? 'Mark unread' : 'Mark read'}
                </button>
                <button
                  type="button"
                  className="button small danger"
                  onClick={() => void act(() => api.remove(n.id))}
                  aria-label={`Delete: ${n.title}`}
                >
                  Delete
                </button>
              </div>
            </li>
          ))}
        </ul>
      )}

      {pagination && pagination.totalPages > 1 ? (
        <nav className="pagination" aria-label="Pages">
          <button
            type="button"
            className="button secondary"
            disabled={!pagination.hasPreviousPage}
            onClick={() => setPage((p) => p - 1)}
          >
            Previous
          </button>
          <span>
            Page {pagination.page} of {pagination.totalPages} ({pagination.totalCount})
          </span>
          <button
            type="button"
            className="button secondary"
            disabled={!pagination.hasNextPage}
            onClick={() => setPage((p) => p + 1)}
          >
            Next
          </button>
        </nav>
      ) : null}
    </section>
  );
}
