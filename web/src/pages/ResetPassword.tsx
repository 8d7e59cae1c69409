// The reset email links here with ?token=…; a new password signs out every other session of the account.
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useState } from 'react';
import { Alert, Field } from '../components/Form';
import { errorMessage } from '../format';
import { Link, useLocation } from '../router';

export function ResetPasswordPage() {
  const client = useHeraldClient();
  const { query } = useLocation();
  const token = query.get('token');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(
    token ? null : 'This page needs the link from your reset email.',
  );
  const [done, setDone] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!token) return;
    setBusy(true);
    setError(null);
    const result = await client.auth.resetPassword({ newPassword: password, token });
    setBusy(false);
    if (result.error) setError(errorMessage(result.error, 'Could not reset the password'));
    else setDone(true);
  };

  return (
    <section className="card narrow">
      <h1>Choose a new password</h1>
      {done ? (
        <p role="status">
          Your password is changed. <Link to="/sign-in">Sign in</Link>
        </p>
      ) : (
        <form onSubmit={(e) => void submit(e)}>
          <Field
            label="New password"
            type="password"
            autoComplete="new-password"
            minLength={8}
            required
            hint="At least 8 characters."
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
          <Alert>{error}</Alert>
          <div className="actions">
            <button type="submit" className="button" disabled={busy || !token}>
              Set new password
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
