// The reset email links here with ?token=…; a new password signs out every other session of the account.
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useState } from 'react';
import { Alert, Field } from '../components/Form';
import { errorMessage } from '../format';
import { FIXED } from '../i18n';
import { useTexts } from '../locale';
import { Link, useLocation } from '../router';

export function ResetPasswordPage() {
  const client = useHeraldClient();
  const { query } = useLocation();
  const token = query.get('token');
  const t = useTexts();
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!token) return;
    setBusy(true);
    setError(null);
    const result = await client.auth.resetPassword({ newPassword: password, token });
    setBusy(false);
    if (result.error) setError(errorMessage(result.error, t.reset.failed, t));
    else setDone(true);
  };

  return (
    <section className="card narrow">
      <h1>{t.reset.title}</h1>
      {done ? (
        <p role="status">
          {t.reset.done} <Link to="/sign-in">{FIXED.signIn}</Link>
        </p>
      ) : (
        <form onSubmit={(e) => void submit(e)}>
          <Field
            label={t.reset.newPassword}
            type="password"
            autoComplete="new-password"
            minLength={8}
            required
            hint={t.signUp.passwordHint}
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
          <Alert>{token ? error : t.reset.needsLink}</Alert>
          <div className="actions">
            <button type="submit" className="button" disabled={busy || !token}>
              {t.reset.submit}
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
