// API keys for backends (CONTRACT §9): create one (the key is shown once), list them, revoke one after a
// confirmation. A revoked key stops working on every instance before the revoke call returns.
import { API_KEY_SCOPES, type ApiKey, type ApiKeyScope, type CreatedApiKey } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useCallback, useEffect, useId, useState } from 'react';
import { Alert } from '../components/Form';
import { ShownOnce } from '../components/ShownOnce';
import { errorMessage, formatDateTime } from '../format';
import { useLocale, useTexts } from '../locale';
import { useCurrentUser } from '../session';

export function AdminApiKeysPage() {
  const { admin } = useHeraldClient();
  const { user: me } = useCurrentUser();
  const t = useTexts();
  const locale = useLocale();
  const ids = useId();
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [listError, setListError] = useState<unknown>(null);
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<ApiKeyScope[]>(['notifications:send']);
  const [expires, setExpires] = useState('');
  const [busy, setBusy] = useState(false);
  const [formError, setFormError] = useState<string | null>(null);
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const [confirm, setConfirm] = useState<string | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  const load = useCallback(async () => {
    try {
      setKeys(await admin.apiKeys.list());
      setListError(null);
    } catch (err) {
      setListError(err);
    }
  }, [admin]);

  useEffect(() => {
    void load();
  }, [load]);

  const create = async (event: FormEvent) => {
    event.preventDefault();
    setFormError(null);
    setNotice(null);
    if (scopes.length === 0) {
      setFormError(t.apiKeys.pickScope);
      return;
    }
    // datetime-local is the admin's local time; the service wants an instant (ISO 8601 with offset).
    const expiresAt = expires ? new Date(expires) : null;
    if (expiresAt && Number.isNaN(expiresAt.getTime())) {
      setFormError(t.apiKeys.createFailed);
      return;
    }
    setBusy(true);
    try {
      const key = await admin.apiKeys.create({
        name: name.trim(),
        scopes,
        ...(expiresAt ? { expiresAt: expiresAt.toISOString() } : {}),
      });
      setCreated(key);
      setName('');
      setExpires('');
      await load();
    } catch (err) {
      setFormError(errorMessage(err, t.apiKeys.createFailed, t));
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (key: ApiKey) => {
    setConfirm(null);
    setActionError(null);
    setNotice(null);
    try {
      await admin.apiKeys.revoke(key.id);
      setNotice(t.apiKeys.revoked(key.name));
      if (created?.id === key.id) setCreated(null);
    } catch (err) {
      setActionError(errorMessage(err, t.apiKeys.revokeFailed, t));
    }
    await load();
  };

  const expired = (k: ApiKey) => k.expiresAt !== null && new Date(k.expiresAt).getTime() <= Date.now();

  return (
    <section className="stack">
      <div className="card">
        <h1>{t.apiKeys.title}</h1>
        <p className="muted">{t.apiKeys.intro}</p>
        <h2>{t.apiKeys.createHeading}</h2>
        <form onSubmit={(e) => void create(e)} className="stack form-top">
          <div className="field">
            <label htmlFor={`${ids}-name`}>{t.apiKeys.name}</label>
            <input
              id={`${ids}-name`}
              required
              maxLength={100}
              autoComplete="off"
              value={name}
              onChange={(e) => setName(e.target.value)}
            />
          </div>
          <fieldset className="choices">
            <legend>{t.apiKeys.scopes}</legend>
            {API_KEY_SCOPES.map((scope) => (
              <label key={scope} className="check">
                <input
                  type="checkbox"
                  checked={scopes.includes(scope)}
                  onChange={(e) =>
                    setScopes(e.target.checked ? [...scopes, scope] : scopes.filter((s) => s !== scope))
                  }
                />
                <code>{scope}</code>
                <span className="muted">({t.apiKeys.scopeHints[scope]})</span>
              </label>
            ))}
          </fieldset>
          <div className="field">
            <label htmlFor={`${ids}-expires`}>{t.apiKeys.expires}</label>
            <input
              id={`${ids}-expires`}
              type="datetime-local"
              aria-describedby={`${ids}-expires-hint`}
              value={expires}
              onChange={(e) => setExpires(e.target.value)}
            />
            <small id={`${ids}-expires-hint`} className="muted">
              {t.apiKeys.expiresHint}
            </small>
          </div>
          <Alert>{formError}</Alert>
          <div className="actions">
            <button type="submit" className="button" disabled={busy}>
              {t.apiKeys.create}
            </button>
          </div>
        </form>
        {created ? (
          <ShownOnce
            heading={t.apiKeys.newKeyHeading(created.name)}
            label={t.apiKeys.newKey}
            value={created.key}
            warning={t.apiKeys.shownOnce}
            copyLabel={t.apiKeys.copyKey}
            onDone={() => setCreated(null)}
          />
        ) : null}
      </div>

      <div className="card">
        <h2>{t.apiKeys.listHeading}</h2>
        <Alert>{listError ? errorMessage(listError, t.apiKeys.listFailed, t) : null}</Alert>
        <Alert>{actionError}</Alert>
        <Alert tone="success">{notice}</Alert>
        {keys === null ? (
          listError ? null : (
            <p className="muted">{t.common.loading}</p>
          )
        ) : keys.length === 0 ? (
          <p className="muted">{t.apiKeys.none}</p>
        ) : (
          <div className="table-wrap">
            <table className="stack-table" aria-label={t.apiKeys.listHeading}>
              <thead>
                <tr>
                  <th scope="col">{t.apiKeys.colName}</th>
                  <th scope="col">{t.apiKeys.colPrefix}</th>
                  <th scope="col">{t.apiKeys.colScopes}</th>
                  <th scope="col">{t.apiKeys.colCreatedBy}</th>
                  <th scope="col">{t.apiKeys.colCreated}</th>
                  <th scope="col">{t.apiKeys.colExpires}</th>
                  <th scope="col">{t.apiKeys.colLastUsed}</th>
                  <th scope="col">{t.apiKeys.colActions}</th>
                </tr>
              </thead>
              <tbody>
                {keys.map((k) => (
                  <tr key={k.id}>
                    <td data-label={t.apiKeys.colName}>{k.name}</td>
                    <td data-label={t.apiKeys.colPrefix}>
                      <code>{k.prefix}…</code>
                    </td>
                    <td data-label={t.apiKeys.colScopes}>{k.scopes.join(', ')}</td>
                    <td data-label={t.apiKeys.colCreatedBy}>
                      {k.createdBy === null ? (
                        '—'
                      ) : k.createdBy === me?.id ? (
                        t.apiKeys.you
                      ) : (
                        <code title={k.createdBy}>{k.createdBy}</code>
                      )}
                    </td>
                    <td data-label={t.apiKeys.colCreated}>{formatDateTime(k.createdAt, locale)}</td>
                    <td data-label={t.apiKeys.colExpires}>
                      {k.expiresAt === null ? t.common.never : formatDateTime(k.expiresAt, locale)}
                      {expired(k) ? <strong className="error"> ({t.apiKeys.expired})</strong> : null}
                    </td>
                    <td data-label={t.apiKeys.colLastUsed}>
                      {k.lastUsedAt === null ? t.common.never : formatDateTime(k.lastUsedAt, locale)}
                    </td>
                    <td data-label={t.apiKeys.colActions}>
                      {confirm === k.id ? (
                        // Revoking cannot be undone (a backend using the key fails at once): asked twice.
                        <span className="confirm">
                          <button
                            type="button"
                            className="button small danger"
                            aria-label={t.apiKeys.confirmRevokeLabel(k.name)}
                            onClick={() => void revoke(k)}
                          >
                            {t.apiKeys.yesRevoke}
                          </button>
                          <button
                            type="button"
                            className="button small secondary"
                            onClick={() => setConfirm(null)}
                          >
                            {t.common.cancel}
                          </button>
                        </span>
                      ) : (
                        <button
                          type="button"
                          className="button small danger"
                          aria-label={t.apiKeys.revokeLabel(k.name)}
                          onClick={() => setConfirm(k.id)}
                        >
                          {t.apiKeys.revoke}
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </div>
    </section>
  );
}
