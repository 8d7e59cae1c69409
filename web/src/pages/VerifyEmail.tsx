// The verification email links here with ?token=…; the page verifies it through the API. Arriving without a
// token is the end of better-auth's own redirect flow (/auth/verify-email?token=…&callbackURL=/verify-email),
// which adds ?error=… when the token was refused.
import { useHeraldClient } from '@herald/client/react';
import { useEffect, useRef, useState } from 'react';
import { errorMessage } from '../format';
import { FIXED, type Texts } from '../i18n';
import { useTexts } from '../locale';
import { Link, useLocation } from '../router';
import { useCurrentUser } from '../session';

// The failure is kept as what the service said (a code, or its error), and put into words at render time.
type State =
  | { kind: 'verifying' }
  | { kind: 'verified' }
  | { kind: 'failed'; code: string; error?: unknown }
  | { kind: 'idle' };

function reason(code: string, t: Texts): string | undefined {
  switch (code) {
    case 'invalid_token':
    case 'INVALID_TOKEN':
      return t.verify.invalidToken;
    case 'token_expired':
    case 'TOKEN_EXPIRED':
      return t.verify.expired;
    case 'user_not_found':
      return t.verify.userNotFound;
    default:
      return undefined;
  }
}

export function VerifyEmailPage() {
  const client = useHeraldClient();
  const { query } = useLocation();
  const { user, refetch } = useCurrentUser();
  const t = useTexts();
  const token = query.get('token');
  const redirectError = query.get('error');
  const [state, setState] = useState<State>(() =>
    token
      ? { kind: 'verifying' }
      : redirectError
        ? { kind: 'failed', code: redirectError }
        : { kind: 'verified' },
  );
  const started = useRef<string | null>(null);

  useEffect(() => {
    // A token is single-use: verify it once even if the effect runs twice (StrictMode, re-render).
    if (!token || started.current === token) return;
    started.current = token;
    void client.auth.verifyEmail({ query: { token } }).then((result) => {
      if (result.error) {
        const code = typeof result.error.code === 'string' ? result.error.code : '';
        setState({ kind: 'failed', code, error: result.error });
        return;
      }
      setState({ kind: 'verified' });
      refetch();
    });
  }, [client, token, refetch]);

  const failure =
    state.kind === 'failed'
      ? (reason(state.code, t) ??
        (state.error === undefined ? state.code : errorMessage(state.error, t.verify.failed, t)))
      : null;

  return (
    <section className="card narrow">
      <h1>{t.verify.title}</h1>
      {state.kind === 'verifying' ? <p role="status">{t.verify.verifying}</p> : null}
      {state.kind === 'verified' ? (
        <>
          <p role="status">{t.verify.verified}</p>
          <p>
            {user ? (
              <Link to="/notifications">{t.verify.goInbox}</Link>
            ) : (
              <Link to="/sign-in">{FIXED.signIn}</Link>
            )}
          </p>
        </>
      ) : null}
      {failure !== null ? (
        <>
          <p role="alert" className="error">
            {failure}
          </p>
          <p>
            <Link to="/sign-in">{FIXED.signIn}</Link>
            {t.verify.toGetNew}
          </p>
        </>
      ) : null}
    </section>
  );
}
