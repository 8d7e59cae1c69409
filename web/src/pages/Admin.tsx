// Administrator broadcast: one user, a list, or everyone; optional action link and a per-send delivery order.
import type { BroadcastRequest, BroadcastResult } from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useId, useState } from 'react';
import { Alert } from '../components/Form';
import { errorMessage } from '../format';
import { NOTIFICATION_TYPES, type NotificationType, typeLabel } from '../types';

type Scope = 'user' | 'users' | 'all';
type Strategy = 'sse' | 'email' | 'push';
const STRATEGIES: Array<{ id: Strategy; label: string }> = [
  { id: 'sse', label: 'Live (SSE)' },
  { id: 'email', label: 'Email' },
  { id: 'push', label: 'Push' },
];

export function AdminPage() {
  const { admin } = useHeraldClient();
  const ids = useId();
  const [scope, setScope] = useState<Scope>('user');
  const [identifier, setIdentifier] = useState('');
  const [identifiers, setIdentifiers] = useState('');
  const [type, setType] = useState<NotificationType>('announcement');
  const [title, setTitle] = useState('');
  const [content, setContent] = useState('');
  const [actionUrl, setActionUrl] = useState('');
  const [actionLabel, setActionLabel] = useState('Open');
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
        setError('Enter at least one user id or email.');
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
                actions: [{ actionId: 'open', type: 'link', label: actionLabel.trim() || 'Open', url }],
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
      setError(errorMessage(err, 'Could not send'));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="card">
      <h1>Send a notification</h1>
      <form onSubmit={(e) => void submit(e)} className="stack">
        <fieldset className="choices">
          <legend>Recipients</legend>
          {(
            [
              ['user', 'One user'],
              ['users', 'Several users'],
              ['all', 'Everyone'],
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
            <label htmlFor={`${ids}-user`}>User id or email</label>
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
            <label htmlFor={`${ids}-users`}>User ids or emails</label>
            <textarea
              id={`${ids}-users`}
              rows={3}
              required
              value={identifiers}
              onChange={(e) => setIdentifiers(e.target.value)}
              aria-describedby={`${ids}-users-hint`}
            />
            <small id={`${ids}-users-hint`} className="muted">
              Separated by commas, spaces or new lines (up to 10,000).
            </small>
          </div>
        ) : null}
        <div className="field">
          <label htmlFor={`${ids}-type`}>Type</label>
          <select
            id={`${ids}-type`}
            value={type}
            onChange={(e) => setType(e.target.value as NotificationType)}
          >
            {NOTIFICATION_TYPES.map((t) => (
              <option key={t} value={t}>
                {typeLabel(t)}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${ids}-title`}>Title</label>
          <input
            id={`${ids}-title`}
            required
            maxLength={255}
            value={title}
            onChange={(e) => setTitle(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor={`${ids}-content`}>Content</label>
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
            <label htmlFor={`${ids}-url`}>Action URL</label>
            <input
              id={`${ids}-url`}
              placeholder="/chat or https://…"
              value={actionUrl}
              onChange={(e) => setActionUrl(e.target.value)}
            />
          </div>
          <div className="field">
            <label htmlFor={`${ids}-label`}>Action label</label>
            <input
              id={`${ids}-label`}
              maxLength={100}
              value={actionLabel}
              onChange={(e) => setActionLabel(e.target.value)}
            />
          </div>
        </div>
        <label className="check">
          <input type="checkbox" checked={override} onChange={(e) => setOverride(e.target.checked)} />
          Override the delivery strategies
        </label>
        {override ? (
          <fieldset className="choices">
            <legend>Delivery strategies, in order</legend>
            {STRATEGIES.map((s) => (
              <label key={s.id} className="check">
                <input
                  type="checkbox"
                  checked={strategies.includes(s.id)}
                  onChange={(e) =>
                    setStrategies(
                      e.target.checked ? [...strategies, s.id] : strategies.filter((x) => x !== s.id),
                    )
                  }
                />
                {s.label}
              </label>
            ))}
            <small className="muted">Order: {strategies.join(' → ') || 'none'}</small>
          </fieldset>
        ) : null}
        <Alert>{error}</Alert>
        <div className="actions">
          <button type="submit" className="button" disabled={busy}>
            Send notification
          </button>
        </div>
      </form>
      {result ? (
        <output className="result" aria-label="Result">
          <dl>
            <dt>Matched users</dt>
            <dd data-testid="target-count">{result.targetCount}</dd>
            <dt>Created</dt>
            <dd data-testid="created-count">{result.createdCount}</dd>
            <dt>Skipped (banned)</dt>
            <dd data-testid="skipped-count">{result.skippedCount}</dd>
          </dl>
          {result.failures.length > 0 ? (
            <>
              <h2>Failures</h2>
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
