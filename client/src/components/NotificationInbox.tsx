// The inbox: filters (all/unread/read, type, search), pages, mark read/unread, delete, mark all read and delete all,
// live. What it shows is the server's answer to the current query: every live event that changes what the server
// holds (a new notification, a change in another tab or device, a resync after a reconnect) refetches the page.
import {
  createElement,
  type FormEvent,
  type MouseEvent,
  useCallback,
  useEffect,
  useId,
  useRef,
  useState,
} from 'react';
import {
  type ListResponse,
  NOTIFICATION_TYPES,
  type Notification,
  type NotificationAction,
  type NotificationMetadata,
  type NotificationStreamEventName,
  type NotificationType,
} from '../contract.js';
import { useNotifications } from '../hooks.js';
import { cx, errorMessage, formatTime, plural, typeLabel } from './format.js';

export type InboxFilter = 'all' | 'unread' | 'read';

export interface NotificationInboxProps {
  /** Notifications per page (1–100, default 20). */
  pageSize?: number;
  /** The inbox's heading (default 'Notifications'); null renders none (the page has its own). */
  title?: string | null;
  /** Level of the inbox's heading (default 2); each notification's title is one level below. */
  headingLevel?: 1 | 2 | 3 | 4 | 5;
  /** Show the filter, type and search controls (default true). */
  showFilters?: boolean;
  /** Called when an action link of a notification is followed (e.g. to route in the app and preventDefault()). */
  onActionClick?: (
    action: NotificationAction,
    notification: Notification,
    event: MouseEvent<HTMLAnchorElement>,
  ) => void;
  className?: string;
}

/** Events after which the shown page may differ from the server's (and `connected`, after which a resync may have happened). */
const REFETCH_ON: ReadonlySet<NotificationStreamEventName> = new Set([
  'connected',
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
]);

const metadataOf = (n: Notification) => n.metadata as NotificationMetadata;

/**
 * A complete notification inbox over the live feed; render it inside `<HeraldProvider>` while signed in.
 * Accessible names: filter buttons `All`, `Unread`, `Read`; `Filter by type`; `Search`; per item
 * `Mark read: <title>` / `Mark unread: <title>` and `Delete: <title>`; `Mark all read`; `Delete all`.
 *
 * @example
 * import { HeraldProvider, NotificationInbox } from '@herald/client/react';
 * import '@herald/client/styles.css';
 *
 * <HeraldProvider client={client}>
 *   <NotificationInbox pageSize={20} />
 * </HeraldProvider>
 */
export function NotificationInbox({
  pageSize = 20,
  title = 'Notifications',
  headingLevel = 2,
  showFilters = true,
  onActionClick,
  className,
}: NotificationInboxProps) {
  const { api, feed, unreadCount, status } = useNotifications();
  const [filter, setFilter] = useState<InboxFilter>('all');
  const [type, setType] = useState<NotificationType | ''>('');
  const [searchInput, setSearchInput] = useState('');
  const [search, setSearch] = useState('');
  const [page, setPage] = useState(1);
  const [data, setData] = useState<ListResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirmClear, setConfirmClear] = useState(false);
  const request = useRef(0);
  const ids = useId();

  const load = useCallback(async () => {
    const id = ++request.current;
    try {
      const result = await api.list({
        page,
        limit: pageSize,
        filter,
        ...(type ? { type } : {}),
        ...(search ? { search } : {}),
      });
      // Only the latest request may update the list (answers can arrive out of order).
      if (id !== request.current) return;
      setData(result);
      setError(null);
      if (result.pagination.totalPages > 0 && page > result.pagination.totalPages) {
        setPage(result.pagination.totalPages);
      }
    } catch (err) {
      if (id === request.current) setError(errorMessage(err, 'Could not load notifications'));
    }
  }, [api, page, pageSize, filter, type, search]);

  useEffect(() => {
    void load();
  }, [load]);

  // A burst of events (a replay after reconnecting) costs one request. An `error` event ends the stream (the
  // session ended, for instance) and must not send requests that can only fail.
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
  // Back online (or reconnected): refetch in case nothing was missed but time passed.
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
  const itemHeading = `h${Math.min(headingLevel + 1, 6)}`;

  return (
    <section
      className={cx('herald', 'herald-inbox', className)}
      aria-labelledby={title ? `${ids}-title` : undefined}
      aria-label={title ? undefined : 'Notifications'}
    >
      {title ? (
        <div className="herald-inbox-head">
          {createElement(`h${headingLevel}`, { id: `${ids}-title`, className: 'herald-title' }, title)}
          <p className="herald-muted" aria-live="polite">
            {unreadCount === null ? '' : plural(unreadCount, 'unread notification')}
            {status !== 'open' && status !== 'idle' ? ` · ${status}` : ''}
          </p>
        </div>
      ) : null}

      {showFilters ? (
        <div className="herald-toolbar">
          <fieldset className="herald-segmented" aria-label="Show">
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
          <label className="herald-field">
            <span>Filter by type</span>
            <select
              value={type}
              onChange={(e) => {
                setType(e.target.value as NotificationType | '');
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
          {/* biome-ignore lint/a11y/useSemanticElements: <search> is too new for every browser the SDK supports */}
          <form className="herald-search" role="search" onSubmit={submitSearch}>
            <label className="herald-field">
              <span>Search</span>
              <input
                type="search"
                value={searchInput}
                onChange={(e) => setSearchInput(e.target.value)}
                maxLength={200}
              />
            </label>
            <button type="submit" className="herald-button herald-secondary">
              Go
            </button>
          </form>
        </div>
      ) : null}

      <div className="herald-toolbar">
        <button
          type="button"
          className="herald-button herald-secondary"
          disabled={!unreadCount}
          onClick={() => void act(() => api.markAllRead())}
        >
          Mark all read
        </button>
        {confirmClear ? (
          <>
            <button
              type="button"
              className="herald-button herald-danger"
              onClick={() => {
                setConfirmClear(false);
                void act(() => api.removeAll());
              }}
            >
              Yes, delete all
            </button>
            <button
              type="button"
              className="herald-button herald-secondary"
              onClick={() => setConfirmClear(false)}
            >
              Cancel
            </button>
          </>
        ) : (
          <button
            type="button"
            className="herald-button herald-secondary"
            disabled={!pagination || pagination.totalCount === 0}
            onClick={() => setConfirmClear(true)}
          >
            Delete all
          </button>
        )}
      </div>

      {error ? (
        <p role="alert" className="herald-error">
          {error}
        </p>
      ) : null}

      {data === null ? (
        <p className="herald-muted">Loading…</p>
      ) : items.length === 0 ? (
        <p className="herald-empty">
          {search || type || filter !== 'all' ? 'No notifications match.' : 'No notifications yet.'}
        </p>
      ) : (
        <ul className="herald-list" aria-label="Notifications list">
          {items.map((n) => {
            const metadata = metadataOf(n);
            const actions = metadata?.actions ?? [];
            const urgent = metadata?.priority === 'high' || metadata?.priority === 'urgent';
            return (
              <li
                key={n.id}
                className={cx('herald-item', !n.read && 'herald-unread')}
                data-testid="notification-item"
              >
                <div className="herald-item-head">
                  <span className={`herald-tag herald-tag-${n.type}`}>{typeLabel(n.type)}</span>
                  {urgent ? <span className="herald-tag herald-tag-warning">{metadata.priority}</span> : null}
                  <time dateTime={n.createdAt}>{formatTime(n.createdAt)}</time>
                </div>
                {createElement(
                  itemHeading,
                  { className: 'herald-item-title' },
                  n.read ? null : <span className="herald-sr-only">Unread: </span>,
                  n.title,
                )}
                <p className="herald-item-content">{n.content}</p>
                {actions.length > 0 ? (
                  <div className="herald-item-links">
                    {actions.map((a) => (
                      <a
                        key={a.actionId}
                        href={a.url}
                        className={cx(
                          'herald-button',
                          'herald-small',
                          a.variant === 'destructive' ? 'herald-danger' : 'herald-secondary',
                        )}
                        target={a.openInNewTab ? '_blank' : undefined}
                        rel={a.openInNewTab ? 'noopener noreferrer' : undefined}
                        onClick={onActionClick ? (event) => onActionClick(a, n, event) : undefined}
                      >
                        {a.label}
                      </a>
                    ))}
                  </div>
                ) : null}
                <div className="herald-item-actions">
                  <button
                    type="button"
                    className="herald-button herald-small herald-secondary"
                    onClick={() => void act(() => api.setRead(n.id, !n.read))}
                    aria-label={`${n.read ? 'Mark unread' : 'Mark read'}: ${n.title}`}
                  >
                    {n.read ? 'Mark unread' : 'Mark read'}
                  </button>
                  <button
                    type="button"
                    className="herald-button herald-small herald-danger"
                    onClick={() => void act(() => api.remove(n.id))}
                    aria-label={`Delete: ${n.title}`}
                  >
                    Delete
                  </button>
                </div>
              </li>
            );
          })}
        </ul>
      )}

      {pagination && pagination.totalPages > 1 ? (
        <nav className="herald-pagination" aria-label="Pages">
          <button
            type="button"
            className="herald-button herald-secondary"
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
            className="herald-button herald-secondary"
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
