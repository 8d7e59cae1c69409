// The verification email links here with ?token=…; the page verifies it through the API. Arriving without a
// token is the end of better-auth's own redirect flow (/auth/verify-email?token=…&callbackURL=/verify-email),
// which adds ?error=… when the token was refused.
import { useHeraldClient } from '@herald/client/react';
import { useEffect, useRef, useState } from 'react';
import { errorMessage } from '../format';
import { Link, useLocation } from '../router';
import { useCurrentUser } from '../session';

type State =
  | { kind: 'verifying' }
  | { kind: 'verified' }
  | { kind: 'failed'; message: string }
  | { kind: 'idle' };

const REASONS: Record<string, string> = {
  invalid_token: 'This link is not valid (it may have been used already).',
  INVALID_TOKEN: 'This link is not valid (it may have been used already).',
  token_expired: 'This link has expired. Sign in to get a new one.',
  TOKEN_EXPIRED: 'This link has expired. Sign in to get a new one.',
  user_not_found: 'No account matches this link.',
};

export function VerifyEmailPage() {
  const client = useHeraldClient();
  const { query } = useLocation();
  const { user, refetch } = useCurrentUser();
  const token = query.get('token');
  const redirectError = query.get('error');
  const [state, setState] = useState<State>(() =>
    token
      ? { kind: 'verifying' }
      : redirectError
        ? { kind: 'failed', message: REASONS[redirectError] ?? redirectError }
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
        setState({
          kind: 'failed',
          message: REASONS[code] ?? errorMessage(result.error, 'Could not verify'),
        });
        return;
      }
      setState({ kind: 'verified' });
      refetch();
    });
  }, [client, token, refetch]);

  return (
    <section className="card narrow">
      <h1>Verify your email</h1>
      {state.kind === 'verifying' ? <p role="status">Verifying…</p> : null}
      {state.kind === 'verified' ? (
        <>
          <p role="status">Your email is verified.</p>
          <p>
            {user ? <Link to="/notifications">Go to your inbox</Link> : <Link to="/sign-in">Sign in</Link>}
          </p>
        </>
      ) : null}
      {state.kind === 'failed' ? (
        <>
          <p role="alert" className="error">
            {state.message}
          </p>
          <p>
            <Link to="/sign-in">Sign in</Link> to get a new verification link.
          </p>
        </>
      ) : null}
    </section>
  );
}
