// Top bar: navigation, the notification bell (its accessible name carries the unread count) and the account.
import { useHeraldClient, useUnreadCount } from '@herald/client/react';
import { useEffect, useState } from 'react';
import { errorMessage } from '../format';
import { Link, navigate, useLocation } from '../router';
import { useCurrentUser } from '../session';

export function Bell() {
  const unread = useUnreadCount();
  const count = unread ?? 0;
  const label = `Notifications, ${count} unread`;
  return (
    <button
      type="button"
      className="bell"
      aria-label={label}
      title={label}
      onClick={() => navigate('/notifications')}
    >
      <svg aria-hidden="true" viewBox="0 0 24 24" width="22" height="22">
        <path
          fill="currentColor"
          d="M12 2a6 6 0 0 0-6 6v4.6L4.3 15.3A1 1 0 0 0 5.1 17h13.8a1 1 0 0 0 .8-1.7L18 12.6V8a6 6 0 0 0-6-6zm-2.8 17a3 3 0 0 0 5.6 0z"
        />
      </svg>
      {count > 0 ? (
        <span className="badge" aria-hidden="true" data-testid="unread-badge">
          {count > 99 ? '99+' : count}
        </span>
      ) : null}
    </button>
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
    // send them back. Once it has, pages that need a user redirect to /sign-in (public ones stay, as a guest).
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
