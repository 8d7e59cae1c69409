// Sign in by email or username and password, or by a magic link; the social button appears only when the
// service reports a configured provider (GET /client-config).
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useEffect, useState } from 'react';
import { apiBaseUrl } from '../client';
import { useClientConfig } from '../client-config';
import { Alert, Field } from '../components/Form';
import { ResendVerification } from '../components/ResendVerification';
import { errorCode, errorMessage } from '../format';
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
            ? "Verify your email first: the link was written to the service's log (no SMTP server is configured)."
            : 'Verify your email first: follow the link we sent you.'
          : errorMessage(result.error, 'Could not sign in'),
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
      setError('Enter your email to get a sign-in link.');
      return;
    }
    setBusy(true);
    const result = await client.auth.signIn.magicLink({ email: identifier.trim() });
    setBusy(false);
    if (result.error) setError(errorMessage(result.error, 'Could not send the link'));
    else setNotice('Check your email: the link signs you in.');
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
      if (!res.ok || !data.url) throw new Error(data.message ?? 'Could not start the sign-in');
      window.location.assign(data.url);
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  return (
    <section className="card narrow">
      <h1>Sign in</h1>
      <form onSubmit={(e) => void submit(e)} noValidate={false}>
        {mode === 'email' ? (
          <Field
            label="Email"
            type="email"
            autoComplete="email"
            required
            value={identifier}
            onChange={(e) => setIdentifier(e.target.value)}
          />
        ) : (
          <Field
            label="Username"
            autoComplete="username"
            required
            value={identifier}
            onChange={(e) => setIdentifier(e.target.value)}
          />
        )}
        <Field
          label="Password"
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
            Sign in
          </button>
          <button
            type="button"
            className="button link"
            onClick={() => {
              setMode(mode === 'email' ? 'username' : 'email');
              setIdentifier('');
            }}
          >
            {mode === 'email' ? 'Use a username instead' : 'Use an email instead'}
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
            Email me a sign-in link
          </button>
        ) : null}
        {config?.socialProvider ? (
          <button type="button" className="button secondary" onClick={() => void socialSignIn()}>
            Continue with {label(config.socialProvider.id)}
          </button>
        ) : null}
      </div>
      <p className="muted">
        <Link to="/forgot-password">Forgot your password?</Link> · No account?{' '}
        <Link to="/sign-up">Create one</Link>
      </p>
    </section>
  );
}
