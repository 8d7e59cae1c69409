// Keeps the live notification feed running on every page while signed in (the bell and the inbox read it)
// and announces each new notification in a toast (role=status, read by screen readers once).
import { useNotifications } from '@herald/client/react';
import { useEffect, useRef, useState } from 'react';
import { useTexts } from '../locale';
import { Link } from '../router';
import { useCurrentUser } from '../session';

interface Toast {
  key: number;
  title: string;
  content: string;
}

const TOAST_MS = 6_000;
// Stream errors that mean the session is gone (a restarting server's SHUTTING_DOWN only means reconnect).
const SESSION_ENDED = new Set(['SESSION_REVOKED', 'SESSION_EXPIRED', 'UNAUTHORIZED']);

export function LiveFeed() {
  const { feed, status, error } = useNotifications();
  const { refetch } = useCurrentUser();
  const texts = useTexts();
  const [toasts, setToasts] = useState<Toast[]>([]);
  const next = useRef(0);

  useEffect(
    () =>
      feed.onEvent((event) => {
        if (event.type !== 'new_notification') return;
        const key = ++next.current;
        const { title, content } = event.notification;
        setToasts((list) => [...list.slice(-2), { key, title, content }]);
        setTimeout(() => setToasts((list) => list.filter((t) => t.key !== key)), TOAST_MS);
      }),
    [feed],
  );

  // The service ends the stream when the session ends (sign-out elsewhere, ban, password reset): ask for the
  // session again, so a page whose session is gone signs out at once instead of at its next request.
  const errorCode = error?.code;
  useEffect(() => {
    if (errorCode && SESSION_ENDED.has(errorCode)) refetch();
  }, [errorCode, refetch]);

  const offline = status === 'offline' || status === 'reconnecting';
  return (
    <>
      {offline ? (
        <p className="connection-banner" role="status">
          {status === 'offline' ? texts.live.offline : texts.live.reconnecting}
        </p>
      ) : null}
      <div className="toasts" role="status" aria-live="polite">
        {toasts.map((t) => (
          <div key={t.key} className="toast">
            <strong>{t.title}</strong>
            <span>{t.content}</span>
            <Link to="/notifications">{texts.nav.openInbox}</Link>
            <button
              type="button"
              className="toast-close"
              aria-label={texts.live.dismiss}
              onClick={() => setToasts((list) => list.filter((x) => x.key !== t.key))}
            >
              ×
            </button>
          </div>
        ))}
      </div>
    </>
  );
}
