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
import { cx, errorMessage, formatTime, plural } from './format.js';

/**
 * Every text the inbox shows or names a control with (none of them is fixed by CONTRACT §10). Functions get the
 * values the text carries. Pass a partial override as `texts`; start a translation from `defaultInboxTexts`.
 */
export interface InboxTexts {
  /** The default heading, and the region's name when there is none. */
  title: string;
  unread: (count: number) => string;
  /** Shown after the unread count while the live feed is not open. */
  status: Record<'connecting' | 'reconnecting' | 'offline' | 'closed', string>;
  /** The group of filter buttons. */
  show: string;
  filters: Record<InboxFilter, string>;
  filterByType: string;
  allTypes: string;
  types: Record<NotificationType, string>;
  priorities: Record<'high' | 'urgent', string>;
  search: string;
  go: string;
  markAllRead: string;
  deleteAll: string;
  confirmDeleteAll: string;
  cancel: string;
  loading: string;
  noMatch: string;
  empty: string;
  /** The list's name. */
  list: string;
  /** Read by screen readers before an unread notification's title. */
  unreadPrefix: string;
  markRead: string;
  markUnread: string;
  markReadLabel: (title: string) => string;
  markUnreadLabel: (title: string) => string;
  delete: string;
  deleteLabel: (title: string) => string;
  /** The pagination's name. */
  pages: string;
  previous: string;
  next: string;
  page: (page: number, pages: number, total: number) => string;
  /**
   * Shown for a failure whose error carries no message of its own (the SDK's errors always carry the service's,
   * which is shown as it came).
   */
  failed: string;
}

/** The inbox's English texts, the default. */
export const defaultInboxTexts: InboxTexts = {
  title: 'Notifications',
  unread: (n) => plural(n, 'unread notification'),
  status: { connecting: 'connecting', reconnecting: 'reconnecting', offline: 'offline', closed: 'closed' },
  show: 'Show',
  filters: { all: 'All', unread: 'Unread', read: 'Read' },
  filterByType: 'Filter by type',
  allTypes: 'All types',
  // 'friend_request' → 'Friend request': derived rather than listed, a few bytes less for every app (the bundle budget).
  types: /* @__PURE__ */ Object.fromEntries(
    NOTIFICATION_TYPES.map((type) => [type, type.replace('_', ' ').replace(/^./, (c) => c.toUpperCase())]),
  ) as Record<NotificationType, string>,
  priorities: { high: 'high', urgent: 'urgent' },
  search: 'Search',
  go: 'Go',
  markAllRead: 'Mark all read',
  deleteAll: 'Delete all',
  confirmDeleteAll: 'Yes, delete all',
  cancel: 'Cancel',
  loading: 'Loading…',
  noMatch: 'No notifications match.',
  empty: 'No notifications yet.',
  list: 'Notifications list',
  unreadPrefix: 'Unread: ',
  markRead: 'Mark read',
  markUnread: 'Mark unread',
  markReadLabel: (title) => `Mark read: ${title}`,
  markUnreadLabel: (title) => `Mark unread: ${title}`,
  delete: 'Delete',
  deleteLabel: (title) => `Delete: ${title}`,
  pages: 'Pages',
  previous: 'Previous',
  next: 'Next',
  page: (page, pages, total) => `Page ${page} of ${pages} (${total})`,
  failed: 'Something went wrong',
};

export type InboxFilter = 'all' | 'unread' | 'read';

export interface NotificationInboxProps {
  /** Notifications per page (1–100, default 20). */
  pageSize?: number;
  /** The inbox's heading (default `texts.title`, 'Notifications'); null renders none (the page has its own). */
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
  /** Texts to use instead of the English defaults (`defaultInboxTexts`), e.g. a translation. */
  texts?: Partial<InboxTexts>;
  /** The language dates and times are shown in (a BCP 47 tag such as `de`; default: the browser's). */
  locale?: string;
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
 * Accessible names (English defaults; `texts` translates them): filter buttons `All`, `Unread`, `Read`;
 * `Filter by type`; `Search`; per item `Mark read: <title>` / `Mark unread: <title>` and `Delete: <title>`;
 * `Mark all read`; `Delete all`.
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
  title: titleProp,
  headingLevel = 2,
  showFilters = true,
  onActionClick,
  texts,
  locale,
  className,
}: NotificationInboxProps) {
  const t = { ...defaultInboxTexts, ...texts };
  const title = titleProp === undefined ? t.title : titleProp;
  const failed = t.failed;
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
      if (id === request.current) setError(errorMessage(err, failed));
    }
  }, [api, page, pageSize, filter, type, search, failed]);

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
      setError(errorMessage(err, t.failed));
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
      aria-label={title ? undefined : t.title}
    >
      {title ? (
        <div className="herald-inbox-head">
          {createElement(`h${headingLevel}`, { id: `${ids}-title`, className: 'herald-title' }, title)}
          <p className="herald-muted" aria-live="polite">
            {unreadCount === null ? '' : t.unread(unreadCount)}
            {status !== 'open' && status !== 'idle' ? ` · ${t.status[status]}` : ''}
          </p>
        </div>
      ) : null}

      {showFilters ? (
        <div className="herald-toolbar">
          <fieldset className="herald-segmented" aria-label={t.show}>
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
                {t.filters[f]}
              </button>
            ))}
          </fieldset>
          <label className="herald-field">
            <span>{t.filterByType}</span>
            <select
              value={type}
              onChange={(e) => {
                setType(e.target.value as NotificationType | '');
                setPage(1);
              }}
            >
              <option value="">{t.allTypes}</option>
              {NOTIFICATION_TYPES.map((type) => (
                <option key={type} value={type}>
                  {t.types[type]}
                </option>
              ))}
            </select>
          </label>
          {/* biome-ignore lint/a11y/useSemanticElements: <search> is too new for every browser the SDK supports */}
          <form className="herald-search" role="search" onSubmit={submitSearch}>
            <label className="herald-field">
              <span>{t.search}</span>
              <input
                type="search"
                value={searchInput}
                onChange={(e) => setSearchInput(e.target.value)}
                maxLength={200}
              />
            </label>
            <button type="submit" className="herald-button herald-secondary">
              {t.go}
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
          {t.markAllRead}
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
              {t.confirmDeleteAll}
            </button>
            <button
              type="button"
              className="herald-button herald-secondary"
              onClick={() => setConfirmClear(false)}
            >
              {t.cancel}
            </button>
          </>
        ) : (
          <button
            type="button"
            className="herald-button herald-secondary"
            disabled={!pagination || pagination.totalCount === 0}
            onClick={() => setConfirmClear(true)}
          >
            {t.deleteAll}
          </button>
        )}
      </div>

      {error ? (
        <p role="alert" className="herald-error">
          {error}
        </p>
      ) : null}

      {data === null ? (
        <p className="herald-muted">{t.loading}</p>
      ) : items.length === 0 ? (
        <p className="herald-empty">{search || type || filter !== 'all' ? t.noMatch : t.empty}</p>
      ) : (
        <ul className="herald-list" aria-label={t.list}>
          {items.map((n) => {
            const metadata = metadataOf(n);
            const actions = metadata?.actions ?? [];
            const priority = metadata?.priority;
            const urgent = priority === 'high' || priority === 'urgent' ? priority : undefined;
            return (
              <li
                key={n.id}
                className={cx('herald-item', !n.read && 'herald-unread')}
                data-testid="notification-item"
              >
                <div className="herald-item-head">
                  <span className={`herald-tag herald-tag-${n.type}`}>{t.types[n.type] ?? n.type}</span>
                  {urgent ? (
                    <span className="herald-tag herald-tag-warning">{t.priorities[urgent]}</span>
                  ) : null}
                  <time dateTime={n.createdAt}>{formatTime(n.createdAt, locale)}</time>
                </div>
                {createElement(
                  itemHeading,
                  { className: 'herald-item-title' },
                  n.read ? null : <span className="herald-sr-only">{t.unreadPrefix}</span>,
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
                    aria-label={n.read ? t.markUnreadLabel(n.title) : t.markReadLabel(n.title)}
                  >
                    {n.read ? t.markUnread : t.markRead}
                  </button>
                  <button
                    type="button"
                    className="herald-button herald-small herald-danger"
                    onClick={() => void act(() => api.remove(n.id))}
                    aria-label={t.deleteLabel(n.title)}
                  >
                    {t.delete}
                  </button>
                </div>
              </li>
            );
          })}
        </ul>
      )}

      {pagination && pagination.totalPages > 1 ? (
        <nav className="herald-pagination" aria-label={t.pages}>
          <button
            type="button"
            className="herald-button herald-secondary"
            disabled={!pagination.hasPreviousPage}
            onClick={() => setPage((p) => p - 1)}
          >
            {t.previous}
          </button>
          <span>{t.page(pagination.page, pagination.totalPages, pagination.totalCount)}</span>
          <button
            type="button"
            className="herald-button herald-secondary"
            disabled={!pagination.hasNextPage}
            onClick={() => setPage((p) => p + 1)}
          >
            {t.next}
          </button>
        </nav>
      ) : null}
    </section>
  );
}
