// Delivery preferences: whether notifications may be emailed (and which types) while you are offline; push is
// reserved by the service and shown for completeness.
import type { Preferences } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useEffect, useState } from 'react';
import { Alert } from '../components/Form';
import { errorMessage } from '../format';
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
  const { notifications } = useHeraldClient();
  const [prefs, setPrefs] = useState<Preferences | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);

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
        }),
      );
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
