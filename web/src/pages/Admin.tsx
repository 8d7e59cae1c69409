// Administrator broadcast: one user, a list, or everyone; optional action link and a per-send delivery order.
import type { BroadcastRequest, BroadcastResult } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useId, useState } from 'react';
import { Alert } from '../components/Form';
import { errorMessage } from '../format';
import { FIXED } from '../i18n';
import { useTexts } from '../locale';
import { NOTIFICATION_TYPES, type NotificationType, typeLabel } from '../types';

type Scope = 'user' | 'users' | 'all';
type Strategy = 'sse' | 'email' | 'push';
const STRATEGIES: Strategy[] = ['sse', 'email', 'push'];

export function AdminPage() {
  const { admin } = useHeraldClient();
  const ids = useId();
  const t = useTexts();
  const [scope, setScope] = useState<Scope>('user');
  const [identifier, setIdentifier] = useState('');
  const [identifiers, setIdentifiers] = useState('');
  const [type, setType] = useState<NotificationType>('announcement');
  const [title, setTitle] = useState('');
  const [content, setContent] = useState('');
  const [actionUrl, setActionUrl] = useState('');
  // Empty means the dictionary's "Open" in the app's language (the placeholder shows it).
  const [actionLabel, setActionLabel] = useState('');
  const [override, setOverride] = useState(false);
  const [strategies, setStrategies] = useState<Strategy[]>(['sse', 'email']);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [result, setResult] = useState<BroadcastResult | null>(null);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    setResult(null);
    let target: BroadcastRequest['target'];
    if (scope === 'user') target = { scope: 'user', identifier: identifier.trim() };
    else if (scope === 'users') {
      const list = identifiers
        .split(/[\s,;]+/)
        .map((s) => s.trim())
        .filter(Boolean);
      if (list.length === 0) {
        setError(t.broadcast.enterOne);
        return;
      }
      target = { scope: 'users', identifiers: list };
    } else target = { scope: 'all' };
    const url = actionUrl.trim();
    const body: BroadcastRequest = {
      target,
      notification: {
        type,
        title: title.trim(),
        content: content.trim(),
        ...(url
          ? {
              metadata: {
                actions: [
                  {
                    actionId: 'open',
                    type: 'link',
                    label: actionLabel.trim() || t.broadcast.actionDefault,
                    url,
                  },
                ],
              },
            }
          : {}),
        ...(override ? { deliveryOptions: { strategies } } : {}),
      },
    };
    setBusy(true);
    try {
      // One key per submitted form: a retried click after a network error cannot send twice.
      setResult(await admin.sendNotification(body, { idempotencyKey: crypto.randomUUID() }));
    } catch (err) {
      setError(errorMessage(err, t.broadcast.failed, t));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="card">
      <h1>{t.broadcast.title}</h1>
      <form onSubmit={(e) => void submit(e)} className="stack">
        <fieldset className="choices">
          <legend>{t.broadcast.recipients}</legend>
          {(
            [
              ['user', t.broadcast.one],
              ['users', t.broadcast.several],
              ['all', t.broadcast.everyone],
            ] as const
          ).map(([value, text]) => (
            <label key={value} className="check">
              <input
                type="radio"
                name="scope"
                value={value}
                checked={scope === value}
                onChange={() => setScope(value)}
              />
              {text}
            </label>
          ))}
        </fieldset>
        {scope === 'user' ? (
          <div className="field">
            <label htmlFor={`${ids}-user`}>{t.broadcast.user}</label>
            <input
              id={`${ids}-user`}
              required
              value={identifier}
              onChange={(e) => setIdentifier(e.target.value)}
            />
          </div>
        ) : null}
        {scope === 'users' ? (
          <div className="field">
            <label htmlFor={`${ids}-users`}>{t.broadcast.users}</label>
            <textarea
              id={`${ids}-users`}
              rows={3}
              required
              value={identifiers}
              onChange={(e) => setIdentifiers(e.target.value)}
              aria-describedby={`${ids}-users-hint`}
            />
            <small id={`${ids}-users-hint`} className="muted">
              {t.broadcast.usersHint}
            </small>
          </div>
        ) : null}
        <div className="field">
          <label htmlFor={`${ids}-type`}>{FIXED.type}</label>
          <select
            id={`${ids}-type`}
            value={type}
            onChange={(e) => setType(e.target.value as NotificationType)}
          >
            {NOTIFICATION_TYPES.map((type) => (
              <option key={type} value={type}>
                {typeLabel(type, t)}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${ids}-title`}>{FIXED.title}</label>
          <input
            id={`${ids}-title`}
            required
            maxLength={255}
            value={title}
            onChange={(e) => setTitle(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor={`${ids}-content`}>{FIXED.content}</label>
          <textarea
            id={`${ids}-content`}
            required
            rows={4}
            maxLength={5000}
            value={content}
            onChange={(e) => setContent(e.target.value)}
          />
        </div>
        <div className="row">
          <div className="field grow">
            <label htmlFor={`${ids}-url`}>{t.broadcast.actionUrl}</label>
            <input
              id={`${ids}-url`}
              placeholder="/chat or https://…"
              value={actionUrl}
              onChange={(e) => setActionUrl(e.target.value)}
            />
          </div>
          <div className="field">
            <label htmlFor={`${ids}-label`}>{t.broadcast.actionLabel}</label>
            <input
              id={`${ids}-label`}
              placeholder={t.broadcast.actionDefault}
              maxLength={100}
              value={actionLabel}
              onChange={(e) => setActionLabel(e.target.value)}
            />
          </div>
        </div>
        <label className="check">
          <input type="checkbox" checked={override} onChange={(e) => setOverride(e.target.checked)} />
          {t.broadcast.override}
        </label>
        {override ? (
          <fieldset className="choices">
            <legend>{t.broadcast.strategies}</legend>
            {STRATEGIES.map((s) => (
              <label key={s} className="check">
                <input
                  type="checkbox"
                  checked={strategies.includes(s)}
                  onChange={(e) =>
                    setStrategies(e.target.checked ? [...strategies, s] : strategies.filter((x) => x !== s))
                  }
                />
                {t.broadcast.strategyNames[s]}
              </label>
            ))}
            <small className="muted">{t.broadcast.order(strategies.join(' → ') || t.broadcast.none)}</small>
          </fieldset>
        ) : null}
        <Alert>{error}</Alert>
        <div className="actions">
          <button type="submit" className="button" disabled={busy}>
            {FIXED.sendNotification}
          </button>
        </div>
      </form>
      {result ? (
        <output className="result" aria-label={t.broadcast.result}>
          <dl>
            <dt>{t.broadcast.matched}</dt>
            <dd data-testid="target-count">{result.targetCount}</dd>
            <dt>{t.broadcast.created}</dt>
            <dd data-testid="created-count">{result.createdCount}</dd>
            <dt>{t.broadcast.skipped}</dt>
            <dd data-testid="skipped-count">{result.skippedCount}</dd>
          </dl>
          {result.failures.length > 0 ? (
            <>
              <h2>{t.broadcast.failures}</h2>
              <ul>
                {result.failures.map((f) => (
                  <li key={`${f.identifier}-${f.reason}`}>
                    {f.identifier}: {f.reason}
                  </li>
                ))}
              </ul>
            </>
          ) : null}
        </output>
      ) : null}
    </section>
  );
}
