// Delivery preferences: whether notifications may be emailed or pushed (and which types) while you are offline,
// and Web Push on this browser: the "Enable push notifications" switch (permission → service worker →
// subscription stored by the service) and the list of subscribed devices.
import type { Preferences, PushSubscriptionView } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { Alert } from '../components/Form';
import { errorCode, errorMessage, formatTime } from '../format';
import { FIXED, LOCALES, type Locale, type Texts, texts } from '../i18n';
import { useLocale, useTexts } from '../locale';
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
  const dict = useTexts();
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
          {typeLabel(t, dict)}
        </label>
      ))}
    </fieldset>
  );
}

/** "Chrome on Linux"-style label from a User-Agent (best effort; the raw string is the title). */
function deviceLabel(userAgent: string | null, t: Texts): string {
  if (!userAgent) return t.prefs.unknownBrowser;
  const browser = /Edg\//.test(userAgent)
    ? 'Edge'
    : /Firefox\//.test(userAgent)
      ? 'Firefox'
      : /Chrome\/|Chromium\//.test(userAgent)
        ? 'Chrome'
        : /Safari\//.test(userAgent)
          ? 'Safari'
          : t.prefs.browser;
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
  return os ? t.prefs.browserOn(browser, os) : browser;
}

/** Web Push on this browser and the list of subscribed devices. */
function PushDevices({ onPreferences }: { onPreferences: (p: Preferences) => void }) {
  const { notifications } = useHeraldClient();
  const { push } = notifications;
  const t = useTexts();
  const locale = useLocale();
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
    refresh().catch((err: unknown) => setError(errorMessage(err, undefined, t)));
  }, [refresh, t]);

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
          ? t.prefs.pushBlocked
          : code === 'PUSH_NOT_CONFIGURED'
            ? t.prefs.pushNotConfigured
            : errorMessage(err, t.prefs.pushFailed, t),
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
      setError(errorMessage(err, t.prefs.removeFailed, t));
    }
  };

  return (
    <section className="stack" aria-labelledby="push-heading">
      <h2 id="push-heading">{t.prefs.pushHeading}</h2>
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
          {FIXED.enablePush}
        </label>
      ) : (
        <p className="muted">{t.prefs.pushUnsupported}</p>
      )}
      <Alert>{error}</Alert>
      <h3>{t.prefs.devices}</h3>
      {devices === null ? (
        <p className="muted">{t.common.loading}</p>
      ) : devices.length === 0 ? (
        <p className="muted">{t.prefs.noDevices}</p>
      ) : (
        <ul aria-label={t.prefs.devices} className="stack">
          {devices.map((d) => {
            const label = deviceLabel(d.userAgent, t);
            return (
              <li key={d.id}>
                <span title={d.userAgent ?? undefined}>{label}</span>
                {d.id === thisDevice?.id ? <strong> {t.prefs.thisDevice}</strong> : null}{' '}
                <small className="muted">{t.prefs.since(formatTime(d.createdAt, locale))}</small>{' '}
                <button
                  type="button"
                  className="button"
                  aria-label={t.prefs.removeLabel(
                    `${label}${d.id === thisDevice?.id ? ` ${t.prefs.thisDevice}` : ''}`,
                  )}
                  onClick={() => void remove(d.id)}
                >
                  {t.prefs.remove}
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
  const { refetch } = useCurrentUser();
  const [locale, setLocale] = useState<Locale | null>(null);
  // The page speaks the app's language (locale.ts) until a new one is saved; the select shows the choice.
  const appLocale = useLocale();
  const current = locale ?? appLocale;
  const t = useTexts();

  useEffect(() => {
    notifications
      .getPreferences()
      .then(setPrefs, (err: unknown) => setError(errorMessage(err, undefined, t)));
  }, [notifications, t]);

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
        // The session carries the locale: read it again so the whole app switches language now.
        refetch();
      }
      setSaved(texts(locale ?? appLocale).prefs.saved);
    } catch (err) {
      setError(errorMessage(err, t.prefs.saveFailed, t));
    } finally {
      setBusy(false);
    }
  };

  if (!prefs) {
    return (
      <section className="card">
        <h1>{t.prefs.title}</h1>
        {error ? <Alert>{error}</Alert> : <p className="muted">{t.common.loading}</p>}
      </section>
    );
  }

  return (
    <section className="card">
      <h1>{t.prefs.title}</h1>
      <form onSubmit={(e) => void submit(e)} className="stack">
        <label className="check">
          <input
            type="checkbox"
            checked={prefs.emailEnabled}
            onChange={(e) => setPrefs({ ...prefs, emailEnabled: e.target.checked })}
          />
          {t.prefs.emailEnabled}
        </label>
        <TypeChoices
          legend={t.prefs.emailTypes}
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
          {t.prefs.pushEnabled}
        </label>
        <TypeChoices
          legend={t.prefs.pushTypes}
          selected={prefs.pushTypes}
          disabled={!prefs.pushEnabled}
          onChange={(pushTypes) => setPrefs({ ...prefs, pushTypes })}
        />
        <Alert>{error}</Alert>
        <Alert tone="success">{saved}</Alert>
        <div className="actions">
          <button type="submit" className="button" disabled={busy}>
            {t.prefs.save}
          </button>
        </div>
      </form>
      <PushDevices onPreferences={setPrefs} />
    </section>
  );
}
