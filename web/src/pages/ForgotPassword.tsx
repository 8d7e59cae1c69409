// Asks for a reset email; the answer is the same whether or not the address has an account.
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useState } from 'react';
import { Alert, Field } from '../components/Form';
import { errorMessage } from '../format';
import { FIXED } from '../i18n';
import { useTexts } from '../locale';
import { Link } from '../router';

export function ForgotPasswordPage() {
  const client = useHeraldClient();
  const t = useTexts();
  const [email, setEmail] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [sent, setSent] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const result = await client.auth.requestPasswordReset({
      email: email.trim(),
      redirectTo: `${window.location.origin}/reset-password`,
    });
    setBusy(false);
    if (result.error) setError(errorMessage(result.error, t.forgot.failed, t));
    else setSent(true);
  };

  return (
    <section className="card narrow">
      <h1>{t.forgot.title}</h1>
      {sent ? (
        <p role="status">{t.forgot.sent}</p>
      ) : (
        <form onSubmit={(e) => void submit(e)}>
          <Field
            label={FIXED.email}
            type="email"
            autoComplete="email"
            required
            value={email}
            onChange={(e) => setEmail(e.target.value)}
          />
          <Alert>{error}</Alert>
          <div className="actions">
            <button type="submit" className="button" disabled={busy}>
              {t.forgot.submit}
            </button>
          </div>
        </form>
      )}
      <p className="muted">
        <Link to="/sign-in">{t.forgot.back}</Link>
      </p>
    </section>
  );
}
