// The magic-link email links here with ?token=…; following it through the API signs the browser in.
import { useHeraldClient } from '@herald/client/react';
import { useEffect, useRef, useState } from 'react';
import { errorMessage } from '../format';
import { useTexts } from '../locale';
import { Link, navigate, useLocation } from '../router';
import { useCurrentUser } from '../session';

export function MagicLinkPage() {
  const client = useHeraldClient();
  const { query } = useLocation();
  const { refetch } = useCurrentUser();
  const token = query.get('token');
  const t = useTexts();
  // The text is chosen at render time, so a language known only after the session loads still applies.
  const [failure, setFailure] = useState<unknown>(null);
  const error = !token ? t.magic.needsLink : failure ? errorMessage(failure, t.magic.invalid, t) : null;
  const started = useRef<string | null>(null);

  useEffect(() => {
    if (!token || started.current === token) return;
    started.current = token;
    void client.auth.magicLink.verify({ query: { token } }).then((result) => {
      if (result.error) {
        setFailure(result.error);
        return;
      }
      refetch();
      navigate('/notifications', { replace: true });
    });
  }, [client, token, refetch]);

  return (
    <section className="card narrow">
      <h1>{t.magic.title}</h1>
      {error ? (
        <>
          <p role="alert" className="error">
            {error}
          </p>
          <p>
            <Link to="/sign-in">{t.forgot.back}</Link>
          </p>
        </>
      ) : (
        <p role="status">{t.magic.checking}</p>
      )}
    </section>
  );
}
