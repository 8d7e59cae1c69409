// Sign in by email or username and password, or by a magic link; the social button appears only when the
// service reports a configured provider (GET /client-config).
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useEffect, useState } from 'react';
import { apiBaseUrl } from '../client';
import { useClientConfig } from '../client-config';
import { Alert, Field } from '../components/Form';
import { ResendVerification } from '../components/ResendVerification';
import { errorCode, errorMessage } from '../format';
import { FIXED } from '../i18n';
import { useTexts } from '../locale';
import { Link, navigate, useLocation } from '../router';
import { useCurrentUser } from '../session';

/** Only same-site paths are followed after sign-in (no open redirect through ?next=). */
export function safeNext(next: string | null): string {
  return next?.startsWith('/') && !next.startsWith('//') ? next : '/notifications';
}

const label = (id: string) => id.charAt(0).toUpperCase() + id.slice(1);

export function SignInPage() {
  const client = useHeraldClient();
  const { query } = useLocation();
  const { user, isPending, refetch } = useCurrentUser();
  const config = useClientConfig();
  const t = useTexts();
  const next = safeNext(query.get('next'));
  const [mode, setMode] = useState<'email' | 'username'>('email');
  const [identifier, setIdentifier] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [unverified, setUnverified] = useState<string | null>(null);

  useEffect(() => {
    if (!isPending && user) navigate(next, { replace: true });
  }, [isPending, user, next]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    setNotice(null);
    const result =
      mode === 'email'
        ? await client.auth.signIn.email({ email: identifier.trim(), password })
        : await client.auth.signIn.username({ username: identifier.trim(), password });
    setBusy(false);
    if (result.error) {
      const notVerified = errorCode(result.error) === 'EMAIL_NOT_VERIFIED';
      setUnverified(notVerified && mode === 'email' ? identifier.trim() : null);
      setError(
        notVerified
          ? config?.emailDelivery === 'log'
            ? t.signIn.verifyFirstLog
            : t.signIn.verifyFirst
          : errorMessage(result.error, t.signIn.failed, t),
      );
      return;
    }
    setUnverified(null);
    refetch();
    navigate(next, { replace: true });
  };

  const sendMagicLink = async () => {
    setError(null);
    setNotice(null);
    if (mode !== 'email' || identifier.trim() === '') {
      setError(t.signIn.enterEmailForLink);
      return;
    }
    setBusy(true);
    const result = await client.auth.signIn.magicLink({ email: identifier.trim() });
    setBusy(false);
    if (result.error) setError(errorMessage(result.error, t.signIn.linkFailed, t));
    else setNotice(t.signIn.linkSent);
  };

  const socialSignIn = async () => {
    const provider = config?.socialProvider;
    if (!provider) return;
    setError(null);
    const callbackURL = `${window.location.origin}${next}`;
    const body =
      provider.signInPath === '/auth/sign-in/social'
        ? { provider: provider.id, callbackURL }
        : { providerId: provider.id, callbackURL };
    try {
      const res = await fetch(`${apiBaseUrl()}${provider.signInPath}`, {
        method: 'POST',
        credentials: 'include',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const data = (await res.json()) as { url?: string; message?: string };
      if (!res.ok || !data.url) throw new Error(data.message ?? t.signIn.startFailed);
      window.location.assign(data.url);
    } catch (err) {
      setError(errorMessage(err, undefined, t));
    }
  };

  return (
    <section className="card narrow">
      <h1>{t.titles.signIn}</h1>
      <form onSubmit={(e) => void submit(e)} noValidate={false}>
        {mode === 'email' ? (
          <Field
            label={FIXED.email}
            type="email"
            autoComplete="email"
            required
            value={identifier}
            onChange={(e) => setIdentifier(e.target.value)}
          />
        ) : (
          <Field
            label={FIXED.username}
            autoComplete="username"
            required
            value={identifier}
            onChange={(e) => setIdentifier(e.target.value)}
          />
        )}
        <Field
          label={FIXED.password}
          type="password"
          autoComplete="current-password"
          required
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <Alert>{error}</Alert>
        {unverified ? <ResendVerification email={unverified} /> : null}
        <Alert tone="success">{notice}</Alert>
        <div className="actions">
          <button type="submit" className="button" disabled={busy || isPending}>
            {FIXED.signIn}
          </button>
          <button
            type="button"
            className="button link"
            onClick={() => {
              setMode(mode === 'email' ? 'username' : 'email');
              setIdentifier('');
            }}
          >
            {mode === 'email' ? t.signIn.useUsername : t.signIn.useEmail}
          </button>
        </div>
      </form>
      <div className="alternatives">
        {mode === 'email' ? (
          <button
            type="button"
            className="button secondary"
            disabled={busy}
            onClick={() => void sendMagicLink()}
          >
            {t.signIn.emailLink}
          </button>
        ) : null}
        {config?.socialProvider ? (
          <button type="button" className="button secondary" onClick={() => void socialSignIn()}>
            {t.signIn.continueWith(label(config.socialProvider.id))}
          </button>
        ) : null}
      </div>
      <p className="muted">
        <Link to="/forgot-password">{t.signIn.forgot}</Link> · {t.signIn.noAccount}{' '}
        <Link to="/sign-up">{t.signIn.createOne}</Link>
      </p>
    </section>
  );
}
