// Top bar: navigation, the notification bell (its accessible name carries the unread count) and the account.
import { NotificationBell, NotificationInbox, useHeraldClient } from '@herald/client/react';
import { useEffect, useState } from 'react';
import { errorMessage } from '../format';
import { followAction } from '../pages/Notifications';
import { Link, useLocation } from '../router';
import { markSignedOut, useCurrentUser } from '../session';

/** The SDK's bell; its panel shows the latest notifications and leads to the inbox page. */
export function Bell() {
  return (
    <NotificationBell
      panel={(close) => (
        <>
          <NotificationInbox
            title="Notifications"
            pageSize={5}
            showFilters={false}
            onActionClick={(action, _notification, event) => {
              followAction(action, event);
              if (event.defaultPrevented) close();
            }}
          />
          <p className="panel-footer">
            <Link to="/notifications" onClick={close}>
              Open inbox
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
      setError(errorMessage(result.error, 'Could not sign out'));
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
          Menu
        </button>
        <nav id="primary-nav" aria-label="Primary" className={menuOpen ? 'nav open' : 'nav'}>
          {user ? <NavLink to="/notifications">Inbox</NavLink> : null}
          <NavLink to="/chat">Chat</NavLink>
          {user ? <NavLink to="/preferences">Preferences</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin">Admin</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin/users">Users</NavLink> : null}
          {user?.isAdmin ? <NavLink to="/admin/metrics">Metrics</NavLink> : null}
        </nav>
        <div className="account">
          {user ? (
            <>
              <Bell />
              <span className="user-name" title={user.email}>
                {user.name || user.email}
              </span>
              <button type="button" className="button secondary" onClick={() => void signOut()}>
                Sign out
              </button>
            </>
          ) : isPending ? null : (
            <>
              <Link to="/sign-in" className="nav-link">
                Sign in
              </Link>
              <Link to="/sign-up" className="button">
                Create account
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
