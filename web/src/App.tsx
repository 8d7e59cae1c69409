// Page table and access rules: signed-out visitors reach the account pages (and the chat, read-only as a guest);
// the rest asks to sign in first and comes back afterwards (?next=). Admin pages need the admin role.
import type { PagePath } from '@herald/server/site-paths';
import { type ReactNode, useEffect } from 'react';
import { Header } from './components/Header';
import { LiveFeed } from './components/LiveFeed';
import { OriginBanner } from './components/OriginBanner';
import type { Texts } from './i18n';
import { texts } from './i18n';
import { useDocumentLanguage, useLocale } from './locale';
import { AdminPage } from './pages/Admin';
import { AdminApiKeysPage } from './pages/AdminApiKeys';
import { AdminMetricsPage } from './pages/AdminMetrics';
import { AdminUsersPage } from './pages/AdminUsers';
import { AdminWebhooksPage } from './pages/AdminWebhooks';
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

interface Page {
  access: Access;
  /** The page's entry in the dictionary (document title, in the app's language). */
  title: keyof Texts['titles'];
  render: () => ReactNode;
}

// Keyed by exactly the pages of the service's table of paths (@herald/server/site-paths, which also decides what
// the service and the development proxy answer with the app): a page missing on either side fails the typecheck.
export const PAGES: Record<PagePath, Page> = {
  '/sign-in': { access: 'public', title: 'signIn', render: () => <SignInPage /> },
  '/sign-up': { access: 'public', title: 'signUp', render: () => <SignUpPage /> },
  '/verify-email': { access: 'public', title: 'verifyEmail', render: () => <VerifyEmailPage /> },
  '/forgot-password': { access: 'public', title: 'forgotPassword', render: () => <ForgotPasswordPage /> },
  '/reset-password': { access: 'public', title: 'resetPassword', render: () => <ResetPasswordPage /> },
  '/magic-link': { access: 'public', title: 'magicLink', render: () => <MagicLinkPage /> },
  '/unsubscribe': { access: 'public', title: 'unsubscribe', render: () => <UnsubscribePage /> },
  '/chat': { access: 'public', title: 'chat', render: () => <ChatPage /> },
  '/notifications': { access: 'user', title: 'notifications', render: () => <NotificationsPage /> },
  '/preferences': { access: 'user', title: 'preferences', render: () => <PreferencesPage /> },
  '/admin': { access: 'admin', title: 'broadcast', render: () => <AdminPage /> },
  '/admin/users': { access: 'admin', title: 'users', render: () => <AdminUsersPage /> },
  '/admin/metrics': { access: 'admin', title: 'metrics', render: () => <AdminMetricsPage /> },
  '/admin/api-keys': { access: 'admin', title: 'apiKeys', render: () => <AdminApiKeysPage /> },
  '/admin/webhooks': { access: 'admin', title: 'webhooks', render: () => <AdminWebhooksPage /> },
};

export function App() {
  const { pathname, query } = useLocation();
  const { user, isPending } = useCurrentUser();
  const page: Page | undefined = (PAGES as Record<string, Page | undefined>)[pathname];
  const here = `${pathname}${query.size > 0 ? `?${query.toString()}` : ''}`;
  const locale = useLocale();
  const t = texts(locale);
  useDocumentLanguage(locale);

  const title = page ? t.titles[page.title] : null;
  useEffect(() => {
    document.title = title ? `${title} · Herald` : 'Herald';
  }, [title]);

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
  else if (isPending || !user) content = <p className="muted">{t.common.loading}</p>;
  else if (page.access === 'admin' && !user.isAdmin) {
    content = (
      <section className="card">
        <h1>{t.app.adminOnly}</h1>
        <p>{t.app.adminOnlyText}</p>
      </section>
    );
  } else content = page.render();

  return (
    <>
      <a className="skip-link" href="#main">
        {t.app.skip}
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
