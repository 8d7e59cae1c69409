// Sign up: the account is created unverified; the email's link leads to /verify-email.
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useState } from 'react';
import { useClientConfig } from '../client-config';
import { Alert, Field } from '../components/Form';
import { ResendVerification } from '../components/ResendVerification';
import { errorMessage } from '../format';
import { FIXED, LOCALES, type Locale, texts } from '../i18n';
import { useLocale } from '../locale';
import { Link } from '../router';

export function SignUpPage() {
  const client = useHeraldClient();
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  // The page speaks the language being chosen, so a visitor sees at once what they pick.
  const [locale, setLocale] = useState<Locale>(useLocale());
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
    if (result.error) setError(errorMessage(result.error, t.signUp.failed, t));
    else setSentTo(email.trim());
  };

  if (sentTo) {
    return (
      <section className="card narrow">
        <h1>{t.signUp.checkEmail}</h1>
        {/* Development without SMTP: nothing was sent; the link is in the service's output. */}
        <p role="status">
          {config?.emailDelivery === 'log' ? t.signUp.sentLog(sentTo) : t.signUp.sentTo(sentTo)}
        </p>
        <ResendVerification email={sentTo} />
        <p>
          <Link to="/sign-in">{t.signUp.goToSignIn}</Link>
        </p>
      </section>
    );
  }

  return (
    <section className="card narrow">
      <h1>{t.signUp.title}</h1>
      <form onSubmit={(e) => void submit(e)}>
        <Field
          label={FIXED.name}
          autoComplete="name"
          required
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <Field
          label={FIXED.email}
          type="email"
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <Field
          label={FIXED.username}
          autoComplete="username"
          hint={t.signUp.usernameHint}
          value={username}
          onChange={(e) => setUsername(e.target.value)}
        />
        <Field
          label={FIXED.password}
          type="password"
          autoComplete="new-password"
          minLength={8}
          required
          hint={t.signUp.passwordHint}
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
            {FIXED.signUp}
          </button>
        </div>
      </form>
      <p className="muted">
        {t.signUp.haveAccount} <Link to="/sign-in">{FIXED.signIn}</Link>
      </p>
    </section>
  );
}
