// The bell: a button whose accessible name starts with `Notifications` and carries the unread count (CONTRACT §10),
// with a badge, opening a panel (by default a compact inbox). The panel is a non-modal dialog: Escape or a click
// outside closes it and gives the focus back to the bell. `texts` translates what is seen (the tooltip) and the
// panel's name; the button's accessible name stays the contract's, in every language.
import { type ReactNode, useEffect, useId, useRef, useState } from 'react';
import { useUnreadCount } from '../hooks.js';
import { cx } from './format.js';
import { type InboxTexts, NotificationInbox } from './NotificationInbox.js';

/**
 * The bell's own texts. Not among them, on purpose: the button's accessible name (`Notifications, N unread`,
 * CONTRACT §10), which screen readers, tests and automation find the bell by in every language.
 */
export interface BellTexts {
  /** The panel's (dialog's) name. */
  panel: string;
  /** The tooltip shown on hover (default: the accessible name). */
  tooltip: (unread: number) => string;
}

const defaultLabel = (unread: number) => `Notifications, ${unread} unread`;

/** The bell's English texts, the default. */
export const defaultBellTexts: BellTexts = { panel: 'Notifications', tooltip: defaultLabel };

export interface NotificationBellProps {
  /**
   * What the panel shows; a function gets `close`. Default: a `NotificationInbox` of 10 per page, without filters.
   * Ignored when `onOpen` is given.
   */
  panel?: ReactNode | ((close: () => void) => ReactNode);
  /** Called instead of opening the panel (e.g. to navigate to an inbox page). */
  onOpen?: () => void;
  /**
   * The button's accessible name for an unread count (default `Notifications, N unread`, the contract's: keep it
   * unless the app's own contract names the bell otherwise; translate the tooltip with `texts` instead).
   */
  label?: (unread: number) => string;
  /** Texts to use instead of the English defaults (`defaultBellTexts`), e.g. a translation. */
  texts?: Partial<BellTexts>;
  /** Texts of the default panel's inbox. */
  inboxTexts?: Partial<InboxTexts>;
  /** The language the default panel shows dates in (a BCP 47 tag; default: the browser's). */
  locale?: string;
  className?: string;
}

/**
 * A notification bell with a live unread badge; render it inside `<HeraldProvider>` while signed in.
 *
 * @example
 * import { HeraldProvider, NotificationBell } from '@herald/client/react';
 * import '@herald/client/styles.css';
 *
 * <HeraldProvider client={client}>
 *   <NotificationBell />
 * </HeraldProvider>
 */
export function NotificationBell({
  panel,
  onOpen,
  label = defaultLabel,
  texts,
  inboxTexts,
  locale,
  className,
}: NotificationBellProps) {
  const unread = useUnreadCount() ?? 0;
  const [open, setOpen] = useState(false);
  const root = useRef<HTMLDivElement>(null);
  const button = useRef<HTMLButtonElement>(null);
  const panelId = useId();
  const name = label(unread);
  const tooltip = texts?.tooltip ? texts.tooltip(unread) : name;

  const close = (refocus = true) => {
    setOpen(false);
    if (refocus) button.current?.focus();
  };

  useEffect(() => {
    if (!open) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        setOpen(false);
        button.current?.focus();
      }
    };
    const onPointer = (event: PointerEvent) => {
      if (root.current && !root.current.contains(event.target as Node)) setOpen(false);
    };
    document.addEventListener('keydown', onKey);
    document.addEventListener('pointerdown', onPointer);
    return () => {
      document.removeEventListener('keydown', onKey);
      document.removeEventListener('pointerdown', onPointer);
    };
  }, [open]);

  const content =
    typeof panel === 'function'
      ? panel(() => close())
      : (panel ?? (
          <NotificationInbox
            pageSize={10}
            showFilters={false}
            headingLevel={2}
            texts={inboxTexts}
            locale={locale}
          />
        ));

  return (
    <div className={cx('herald', 'herald-bell-root', className)} ref={root}>
      <button
        ref={button}
        type="button"
        className="herald-bell"
        aria-label={name}
        title={tooltip}
        aria-expanded={onOpen ? undefined : open}
        aria-controls={onOpen || !open ? undefined : panelId}
        onClick={() => (onOpen ? onOpen() : setOpen((o) => !o))}
      >
        <svg aria-hidden="true" viewBox="0 0 24 24" width="22" height="22">
          <path
            fill="currentColor"
            d="M12 2a6 6 0 0 0-6 6v4.6L4.3 15.3A1 1 0 0 0 5.1 17h13.8a1 1 0 0 0 .8-1.7L18 12.6V8a6 6 0 0 0-6-6zm-2.8 17a3 3 0 0 0 5.6 0z"
          />
        </svg>
        {unread > 0 ? (
          <span className="herald-badge" aria-hidden="true" data-testid="unread-badge">
            {unread > 99 ? '99+' : unread}
          </span>
        ) : null}
      </button>
      {open && !onOpen ? (
        <div
          id={panelId}
          className="herald-panel"
          role="dialog"
          aria-label={texts?.panel ?? defaultBellTexts.panel}
        >
          {content}
        </div>
      ) : null}
    </div>
  );
}
