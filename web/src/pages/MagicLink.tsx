// The magic-link email links here with ?token=…; following it through the API signs the browser in.
import { useHeraldClient } from '@herald/client/react';
import { useEffect, useRef, useState } from 'react';
import { errorMessage } from '../format';
import { Link, navigate, useLocation } from '../router';
import { useCurrentUser } from '../session';

export function MagicLinkPage() {
  const client = useHeraldClient();
  const { query } = useLocation();
  const { refetch } = useCurrentUser();
  const token = query.get('token');
  const [error, setError] = useState<string | null>(
    token ? null : 'This page needs the link from your email.',
  );
  const started = useRef<string | null>(null);

  useEffect(() => {
    if (!token || started.current === token) return;
    started.current = token;
    void client.auth.magicLink.verify({ query: { token } }).then((result) => {
      if (result.error) {
        setError(errorMessage(result.error, 'This link is not valid any more'));
        return;
      }
      refetch();
      navigate('/notifications', { replace: true });
    });
  }, [client, token, refetch]);

  return (
    <section className="card narrow">
      <h1>Signing you in</h1>
      {error ? (
        <>
          <p role="alert" className="error">
            {error}
          </p>
          <p>
            <Link to="/sign-in">Back to sign in</Link>
          </p>
        </>
      ) : (
        <p role="status">Checking your link…</p>
      )}
    </section>
  );
}
