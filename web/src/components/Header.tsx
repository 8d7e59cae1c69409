// Top bar: navigation, the notification bell (its accessible name carries the unread count) and the account.
import { NotificationBell, NotificationInbox, useHeraldClient } from '@herald/client/react';
import { useEffect, useState } from 'react';
import { errorMessage } from '../format';
import { FIXED } from '../i18n';
import { useLocale, useTexts } from '../locale';
import { followAction } from '../pages/Notifications';
import { Link, useLocation } from '../router';
import { markSignedOut, useCurrentUser } from '../session';

/**
 * The SDK's bell; its panel shows the latest notifications and leads to the inbox page. Its tooltip and panel are
 * in the app's language, its accessible name is the contract's (`Notifications, N unread`) in every language.
 */
export function Bell() {
  const t = useTexts();
  const locale = useLocale();
  return (
    <NotificationBell
      texts={t.bell}
      panel={(close) => (
        <>
          <NotificationInbox
            title={t.nav.inboxTitle}
            pageSize={5}
            showFilters={false}
            texts={t.inbox}
            locale={locale}
            onActionClick={(action, _notification, event) => {
              followAction(action, event);
              if (event.defaultPrevented) close();
            }}
          />
          <p className="panel-footer">
            <Link to="/notifications" onClick={close}>
              {t.nav.openInbox}
            </Link>
          </p>
        </>
      )}
    />
  );
}

function NavLink({ to, children }: { to: string; children: string }) {
  const { pathname } = useLocation();
  const current = pathname === to;
  return (
    <Link
      to={to}
      className={current ? 'nav-link current' : 'nav-link'}
      aria-current={current ? 'page' : undefined}
    >
      {children}
    </Link>
  );
}

export function Header() {
  const client = useHeraldClient();
  const { user, isPending, refetch } = useCurrentUser();
  const t = useTexts();
  const [error, setError] = useState<string | null>(null);
  const [menuOpen, setMenuOpen] = useState(false);
  const { pathname } = useLocation();
  // The small-screen menu closes once a link in it was followed.
  // biome-ignore lint/correctness/useExhaustiveDependencies: pathname is the trigger, not an input
  useEffect(() => setMenuOpen(false), [pathname]);

  const signOut = async () => {
    setError(null);
    // Stop the live feed first: requests it would still make for the ending session can only answer 401.
    client.notifications.feed.stop();
    const result = await client.auth.signOut();
    if (result.error) {
      setError(errorMessage(result.error, t.nav.signOutFailed, t));
      return;
    }
    // No navigation here: until the session hook has caught up, the sign-in page would still see the user and
    // send them back. Once it has, pages that need a user redirect to /sign-in (public ones stay, as a guest),
    // without ?next= (markSignedOut).
    markSignedOut();
    refetch();
  };

  return (
    <header className="header">
      <div className="header-inner">
        <Link to="/" className="brand">
          Herald
        </Link>
        <button
          type="button"
          className="menu-toggle"
          aria-expanded={menuOpen}
          aria-controls="primary-nav"
          onClick={() => setMenuOpen((open) => !open)}
        >
          {t.nav.menu}
        </button>
        <nav id="primary-nav" aria-label={t.nav.primary} className={menuOpen ? 'nav open' : 'nav'}>
          {user ? <NavLink to="/notifications">{t.nav.inbox}</NavLink> : null}
          <NavLink to="/chat">{t.nav.chat}</NavLink>
          {user ? <NavLink to="/preferences">{t.nav.preferences}</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin">{t.nav.admin}</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin/users">{t.nav.users}</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin/metrics">{t.nav.metrics}</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin/api-keys">{t.nav.apiKeys}</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin/webhooks">{t.nav.webhooks}</NavLink> : null}
        </nav>
        <div className="account">
          {user ? (
            <>
              <Bell />
              <span className="user-name" title={user.email}>
                {user.name || user.email}
              </span>
              <button type="button" className="button secondary" onClick={() => void signOut()}>
                {FIXED.signOut}
              </button>
            </>
          ) : isPending ? null : (
            <>
              <Link to="/sign-in" className="nav-link">
                {FIXED.signIn}
              </Link>
              <Link to="/sign-up" className="button">
                {t.nav.createAccount}
              </Link>
            </>
          )}
        </div>
      </div>
      {error ? (
        <p role="alert" className="error header-error">
          {error}
        </p>
      ) : null}
    </header>
  );
}
