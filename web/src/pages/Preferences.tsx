// Delivery preferences: whether notifications may be emailed (and which types) while you are offline; push is
// reserved by the service and shown for completeness.
import type { Preferences } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useEffect, useState } from 'react';
import { Alert } from '../components/Form';
import { errorMessage } from '../format';
import { LOCALES, type Locale, localeOf, texts } from '../i18n';
import { useCurrentUser } from '../session';
import { NOTIFICATION_TYPES, type NotificationType, typeLabel } from '../types';

function TypeChoices({
  legend,
  selected,
  onChange,
  disabled,
}: {
  legend: string;
  selected: NotificationType[];
  onChange: (types: NotificationType[]) => void;
  disabled: boolean;
}) {
  return (
    <fieldset className="choices" disabled={disabled}>
      <legend>{legend}</legend>
      {NOTIFICATION_TYPES.map((t) => (
        <label key={t} className="check">
          <input
            type="checkbox"
            checked={selected.includes(t)}
            onChange={(e) => onChange(e.target.checked ? [...selected, t] : selected.filter((x) => x !== t))}
          />
          {typeLabel(t)}
        </label>
      ))}
    </fieldset>
  );
}

export function PreferencesPage() {
  const { notifications, auth } = useHeraldClient();
  const [prefs, setPrefs] = useState<Preferences | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const { user } = useCurrentUser();
  const [locale, setLocale] = useState<Locale | null>(null);
  const current = locale ?? localeOf(user?.locale);
  const t = texts(current);

  useEffect(() => {
    notifications.getPreferences().then(setPrefs, (err: unknown) => setError(errorMessage(err)));
  }, [notifications]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!prefs) return;
    setBusy(true);
    setError(null);
    setSaved(null);
    try {
      setPrefs(
        await notifications.updatePreferences({
          emailEnabled: prefs.emailEnabled,
          pushEnabled: prefs.pushEnabled,
          emailTypes: prefs.emailTypes,
          pushTypes: prefs.pushTypes,
          emailDigest: prefs.emailDigest,
        }),
      );
      if (locale) {
        const result = await auth.updateUser({ locale });
        if (result.error) throw result.error;
      }
      setSaved('Preferences saved.');
    } catch (err) {
      setError(errorMessage(err, 'Could not save'));
    } finally {
      setBusy(false);
    }
  };

  if (!prefs) {
    return (
      <section className="card">
        <h1>Preferences</h1>
        {error ? <Alert>{error}</Alert> : <p className="muted">Loading…</p>}
      </section>
    );
  }

  return (
    <section className="card">
      <h1>Preferences</h1>
      <form onSubmit={(e) => void submit(e)} className="stack">
        <label className="check">
          <input
            type="checkbox"
            checked={prefs.emailEnabled}
            onChange={(e) => setPrefs({ ...prefs, emailEnabled: e.target.checked })}
          />
          Email me notifications while I am offline
        </label>
        <TypeChoices
          legend="Types sent by email"
          selected={prefs.emailTypes}
          disabled={!prefs.emailEnabled}
          onChange={(emailTypes) => setPrefs({ ...prefs, emailTypes })}
        />
        <div className="field">
          <label htmlFor="prefs-digest">{t.digest}</label>
          <select
            id="prefs-digest"
            aria-describedby="prefs-digest-hint"
            value={prefs.emailDigest}
            disabled={!prefs.emailEnabled}
            onChange={(e) =>
              setPrefs({ ...prefs, emailDigest: e.target.value as Preferences['emailDigest'] })
            }
          >
            {(['off', 'hourly', 'daily'] as const).map((d) => (
              <option key={d} value={d}>
                {t.digestOptions[d]}
              </option>
            ))}
          </select>
          <small id="prefs-digest-hint" className="muted">
            {t.digestHint}
          </small>
        </div>
        <div className="field">
          <label htmlFor="prefs-locale">{t.language}</label>
          <select
            id="prefs-locale"
            aria-describedby="prefs-locale-hint"
            value={current}
            onChange={(e) => setLocale(e.target.value as Locale)}
          >
            {LOCALES.map((l) => (
              <option key={l} value={l}>
                {t.localeNames[l]}
              </option>
            ))}
          </select>
          <small id="prefs-locale-hint" className="muted">
            {t.languageHint}
          </small>
        </div>
        <label className="check">
          <input
            type="checkbox"
            checked={prefs.pushEnabled}
            onChange={(e) => setPrefs({ ...prefs, pushEnabled: e.target.checked })}
          />
          Push notifications (not delivered yet by the service)
        </label>
        <TypeChoices
          legend="Types sent by push"
          selected={prefs.pushTypes}
          disabled={!prefs.pushEnabled}
          onChange={(pushTypes) => setPrefs({ ...prefs, pushTypes })}
        />
        <Alert>{error}</Alert>
        <Alert tone="success">{saved}</Alert>
        <div className="actions">
          <button type="submit" className="button" disabled={busy}>
            Save preferences
          </button>
        </div>
      </form>
    </section>
  );
}
