// Page table and access rules: signed-out visitors reach the account pages (and the chat, read-only as a guest);
// the rest asks to sign in first and comes back afterwards (?next=). Admin pages need the admin role.
import { type ReactNode, useEffect } from 'react';
import { Header } from './components/Header';
import { LiveFeed } from './components/LiveFeed';
import { OriginBanner } from './components/OriginBanner';
import { AdminPage } from './pages/Admin';
import { AdminMetricsPage } from './pages/AdminMetrics';
import { AdminUsersPage } from './pages/AdminUsers';
import { ChatPage } from './pages/Chat';
import { ForgotPasswordPage } from './pages/ForgotPassword';
import { MagicLinkPage } from './pages/MagicLink';
import { NotFoundPage } from './pages/NotFound';
import { NotificationsPage } from './pages/Notifications';
import { PreferencesPage } from './pages/Preferences';
import { ResetPasswordPage } from './pages/ResetPassword';
import { SignInPage } from './pages/SignIn';
import { SignUpPage } from './pages/SignUp';
import { UnsubscribePage } from './pages/Unsubscribe';
import { VerifyEmailPage } from './pages/VerifyEmail';
import { navigate, useLocation } from './router';
import { takeSignedOut, useCurrentUser } from './session';

type Access = 'public' | 'user' | 'admin';

const PAGES: Record<string, { access: Access; title: string; render: () => ReactNode }> = {
  '/sign-in': { access: 'public', title: 'Sign in', render: () => <SignInPage /> },
  '/sign-up': { access: 'public', title: 'Sign up', render: () => <SignUpPage /> },
  '/verify-email': { access: 'public', title: 'Verify email', render: () => <VerifyEmailPage /> },
  '/forgot-password': { access: 'public', title: 'Forgot password', render: () => <ForgotPasswordPage /> },
  '/reset-password': { access: 'public', title: 'Reset password', render: () => <ResetPasswordPage /> },
  '/magic-link': { access: 'public', title: 'Magic link', render: () => <MagicLinkPage /> },
  '/unsubscribe': { access: 'public', title: 'Unsubscribe', render: () => <UnsubscribePage /> },
  '/chat': { access: 'public', title: 'Chat', render: () => <ChatPage /> },
  '/notifications': { access: 'user', title: 'Notifications', render: () => <NotificationsPage /> },
  '/preferences': { access: 'user', title: 'Preferences', render: () => <PreferencesPage /> },
  '/admin': { access: 'admin', title: 'Broadcast', render: () => <AdminPage /> },
  '/admin/users': { access: 'admin', title: 'Users', render: () => <AdminUsersPage /> },
  '/admin/metrics': { access: 'admin', title: 'Metrics', render: () => <AdminMetricsPage /> },
};

export function App() {
  const { pathname, query } = useLocation();
  const { user, isPending } = useCurrentUser();
  const page = PAGES[pathname];
  const here = `${pathname}${query.size > 0 ? `?${query.toString()}` : ''}`;

  useEffect(() => {
    document.title = page ? `${page.title} · Herald` : 'Herald';
  }, [page]);

  useEffect(() => {
    if (isPending) return;
    if (pathname === '/') navigate(user ? '/notifications' : '/sign-in', { replace: true });
    else if (page && page.access !== 'public' && !user) {
      navigate(takeSignedOut() ? '/sign-in' : `/sign-in?next=${encodeURIComponent(here)}`, { replace: true });
    } else if (!user) takeSignedOut();
  }, [isPending, pathname, page, user, here]);

  let content: ReactNode;
  if (!page) content = pathname === '/' ? null : <NotFoundPage />;
  else if (page.access === 'public') content = page.render();
  else if (isPending || !user) content = <p className="muted">Loading…</p>;
  else if (page.access === 'admin' && !user.isAdmin) {
    content = (
      <section className="card">
        <h1>Administrators only</h1>
        <p>This page needs the admin role.</p>
      </section>
    );
  } else content = page.render();

  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <Header />
      <OriginBanner />
      {user ? <LiveFeed /> : null}
      <main id="main" className="main">
        {content}
      </main>
    </>
  );
}
