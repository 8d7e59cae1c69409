// Delivery preferences: whether notifications may be emailed or pushed (and which types) while you are offline,
// and Web Push on this browser: the "Enable push notifications" switch (permission → service worker →
// subscription stored by the service) and the list of subscribed devices.
import type { Preferences, PushSubscriptionView } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { Alert } from '../components/Form';
import { errorCode, errorMessage, formatTime } from '../format';
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

/** "Chrome on Linux"-style label from a User-Agent (best effort; the raw string is the title). */
function deviceLabel(userAgent: string | null): string {
  if (!userAgent) return 'Unknown browser';
  const browser = /Edg\//.test(userAgent)
    ? 'Edge'
    : /Firefox\//.test(userAgent)
      ? 'Firefox'
      : /Chrome\/|Chromium\//.test(userAgent)
        ? 'Chrome'
        : /Safari\//.test(userAgent)
          ? 'Safari'
          : 'Browser';
  const os = /Android/.test(userAgent)
    ? 'Android'
    : /iPhone|iPad/.test(userAgent)
      ? 'iOS'
      : /Windows/.test(userAgent)
        ? 'Windows'
        : /Mac OS X/.test(userAgent)
          ? 'macOS'
          : /Linux/.test(userAgent)
            ? 'Linux'
            : '';
  return os ? `${browser} on ${os}` : browser;
}

/** Web Push on this browser and the list of subscribed devices. */
function PushDevices({ onPreferences }: { onPreferences: (p: Preferences) => void }) {
  const { notifications } = useHeraldClient();
  const { push } = notifications;
  const [devices, setDevices] = useState<PushSubscriptionView[] | null>(null);
  const [current, setCurrent] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const supported = push.supported();

  const refresh = useCallback(async () => {
    const [list, endpoint] = await Promise.all([push.list(), supported ? push.currentEndpoint() : null]);
    setDevices(list);
    setCurrent(endpoint);
  }, [push, supported]);

  useEffect(() => {
    refresh().catch((err: unknown) => setError(errorMessage(err)));
  }, [refresh]);

  const thisDevice = devices?.find((d) => d.endpoint === current) ?? null;

  const toggle = async (enable: boolean) => {
    setBusy(true);
    setError(null);
    try {
      if (enable) {
        await push.subscribe();
        onPreferences(await notifications.updatePreferences({ pushEnabled: true }));
      } else {
        await push.unsubscribe();
        // Pushes stay on for the user's other devices; with none left, the preference goes off too.
        if ((await push.list()).length === 0)
          onPreferences(await notifications.updatePreferences({ pushEnabled: false }));
      }
      await refresh();
    } catch (err) {
      const code = errorCode(err);
      setError(
        code === 'PUSH_PERMISSION_DENIED'
          ? 'Notifications are blocked for this site: allow them in the browser settings, then try again.'
          : code === 'PUSH_NOT_CONFIGURED'
            ? 'Push notifications are not configured on this server.'
            : errorMessage(err, 'Could not change push notifications'),
      );
    } finally {
      setBusy(false);
    }
  };

  const remove = async (id: string) => {
    setError(null);
    try {
      if (id === thisDevice?.id) await push.unsubscribe();
      else await push.remove(id);
      await refresh();
    } catch (err) {
      setError(errorMessage(err, 'Could not remove the device'));
    }
  };

  return (
    <section className="stack" aria-labelledby="push-heading">
      <h2 id="push-heading">Push notifications</h2>
      {supported ? (
        <label className="check">
          <input
            type="checkbox"
            role="switch"
            checked={thisDevice !== null}
            disabled={busy || devices === null}
            aria-checked={thisDevice !== null}
            onChange={(e) => void toggle(e.target.checked)}
          />
          Enable push notifications
        </label>
      ) : (
        <p className="muted">This browser cannot receive push notifications.</p>
      )}
      <Alert>{error}</Alert>
      <h3>Subscribed devices</h3>
      {devices === null ? (
        <p className="muted">Loading…</p>
      ) : devices.length === 0 ? (
        <p className="muted">No device receives push notifications.</p>
      ) : (
        <ul aria-label="Subscribed devices" className="stack">
          {devices.map((d) => {
            const label = deviceLabel(d.userAgent);
            return (
              <li key={d.id}>
                <span title={d.userAgent ?? undefined}>{label}</span>
                {d.id === thisDevice?.id ? <strong> (this device)</strong> : null}{' '}
                <small className="muted">since {formatTime(d.createdAt)}</small>{' '}
                <button
                  type="button"
                  className="button"
                  aria-label={`Remove ${label}${d.id === thisDevice?.id ? ' (this device)' : ''}`}
                  onClick={() => void remove(d.id)}
                >
                  Remove
                </button>
              </li>
            );
          })}
        </ul>
      )}
    </section>
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
          Push notifications to my subscribed devices while I am offline
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
      <PushDevices onPreferences={setPrefs} />
    </section>
  );
}
