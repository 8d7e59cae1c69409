// Sign up: the account is created unverified; the email's link leads to /verify-email.
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useState } from 'react';
import { useClientConfig } from '../client-config';
import { Alert, Field } from '../components/Form';
import { ResendVerification } from '../components/ResendVerification';
import { errorMessage } from '../format';
import { browserLocale, LOCALES, type Locale, texts } from '../i18n';
import { Link } from '../router';

export function SignUpPage() {
  const client = useHeraldClient();
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [locale, setLocale] = useState<Locale>(browserLocale());
  const t = texts(locale);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [sentTo, setSentTo] = useState<string | null>(null);
  const config = useClientConfig();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const trimmedUsername = username.trim();
    const result = await client.auth.signUp.email({
      name: name.trim(),
      email: email.trim(),
      password,
      locale,
      ...(trimmedUsername ? { username: trimmedUsername } : {}),
    });
    setBusy(false);
    if (result.error) setError(errorMessage(result.error, 'Could not sign up'));
    else setSentTo(email.trim());
  };

  if (sentTo) {
    return (
      <section className="card narrow">
        <h1>Check your email</h1>
        {config?.emailDelivery === 'log' ? (
          // Development without SMTP: nothing was sent; the link is in the service's output.
          <p role="status">
            No email server is configured, so the verification link for <strong>{sentTo}</strong> was written
            to the service's log. Open it from there, then sign in.
          </p>
        ) : (
          <p role="status">
            We sent a verification link to <strong>{sentTo}</strong>. Follow it, then sign in.
          </p>
        )}
        <ResendVerification email={sentTo} />
        <p>
          <Link to="/sign-in">Go to sign in</Link>
        </p>
      </section>
    );
  }

  return (
    <section className="card narrow">
      <h1>Create an account</h1>
      <form onSubmit={(e) => void submit(e)}>
        <Field
          label="Name"
          autoComplete="name"
          required
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <Field
          label="Email"
          type="email"
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <Field
          label="Username"
          autoComplete="username"
          hint="Optional; lets you sign in without your email."
          value={username}
          onChange={(e) => setUsername(e.target.value)}
        />
        <Field
          label="Password"
          type="password"
          autoComplete="new-password"
          minLength={8}
          required
          hint="At least 8 characters."
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <div className="field">
          <label htmlFor="sign-up-locale">{t.language}</label>
          <select
            id="sign-up-locale"
            aria-describedby="sign-up-locale-hint"
            value={locale}
            onChange={(e) => setLocale(e.target.value as Locale)}
          >
            {LOCALES.map((l) => (
              <option key={l} value={l}>
                {t.localeNames[l]}
              </option>
            ))}
          </select>
          <small id="sign-up-locale-hint" className="muted">
            {t.languageHint}
          </small>
        </div>
        <Alert>{error}</Alert>
        <div className="actions">
          <button type="submit" className="button" disabled={busy}>
            Sign up
          </button>
        </div>
      </form>
      <p className="muted">
        Already have an account? <Link to="/sign-in">Sign in</Link>
      </p>
    </section>
  );
}
