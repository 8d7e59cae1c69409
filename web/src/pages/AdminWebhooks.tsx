// Webhook endpoints (CONTRACT §9): add one (its signing secret is shown once), list them, enable/disable, rotate
// the secret (shown once), send a test event, read the latest deliveries and redeliver one, delete.
import {
  type CreatedWebhook,
  WEBHOOK_EVENT_TYPES,
  type Webhook,
  type WebhookDelivery,
  type WebhookEventType,
} from '@herald/client';
import { useHeraldClient } from '@herald/client/react';
import { type FormEvent, useCallback, useEffect, useId, useState } from 'react';
import { Alert } from '../components/Form';
import { ShownOnce } from '../components/ShownOnce';
import { errorMessage, formatDateTime, formatTime } from '../format';
import { useLocale, useTexts } from '../locale';

// Deliveries change as the queue works (pending → delivered, retries): re-read while the list is open, like the
// metrics page. Not a threshold anywhere, only how fresh the view is.
const DELIVERIES_POLL_MS = 3_000;
const DELIVERIES_LIMIT = 50;

function Deliveries({ webhook, refreshKey }: { webhook: Webhook; refreshKey: number }) {
  const { admin } = useHeraldClient();
  const t = useTexts();
  const locale = useLocale();
  const [deliveries, setDeliveries] = useState<WebhookDelivery[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [tick, setTick] = useState(0);

  // biome-ignore lint/correctness/useExhaustiveDependencies: refreshKey and tick are triggers, not inputs
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        const list = await admin.webhooks.deliveries(webhook.id, { limit: DELIVERIES_LIMIT });
        if (stopped) return;
        setDeliveries(list);
        setError(null);
      } catch (err) {
        if (!stopped) setError(err);
      }
      if (!stopped) timer = setTimeout(() => void poll(), DELIVERIES_POLL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [admin, webhook.id, refreshKey, tick]);

  const redeliver = async (delivery: WebhookDelivery) => {
    setActionError(null);
    setNotice(null);
    try {
      await admin.webhooks.redeliver(webhook.id, delivery.id);
      setNotice(t.webhooks.redelivered(delivery.id));
      setTick((n) => n + 1);
    } catch (err) {
      setActionError(errorMessage(err, t.webhooks.actionFailed, t));
    }
  };

  return (
    <div className="deliveries">
      <div className="actions">
        <button
          type="button"
          className="button small secondary"
          aria-label={t.webhooks.refreshLabel(webhook.url)}
          onClick={() => setTick((n) => n + 1)}
        >
          {t.webhooks.refresh}
        </button>
      </div>
      <Alert>{error ? errorMessage(error, t.webhooks.deliveriesFailed, t) : null}</Alert>
      <Alert>{actionError}</Alert>
      <Alert tone="success">{notice}</Alert>
      {deliveries === null ? (
        error ? null : (
          <p className="muted">{t.common.loading}</p>
        )
      ) : deliveries.length === 0 ? (
        <p className="muted">{t.webhooks.noDeliveries}</p>
      ) : (
        <div className="table-wrap">
          <table className="stack-table">
            <caption>{t.webhooks.deliveriesCaption(webhook.url)}</caption>
            <thead>
              <tr>
                <th scope="col">{t.webhooks.colEvent}</th>
                <th scope="col">{t.webhooks.colType}</th>
                <th scope="col">{t.webhooks.colStatus}</th>
                <th scope="col">{t.webhooks.colCode}</th>
                <th scope="col">{t.webhooks.colAttempt}</th>
                <th scope="col">{t.webhooks.colNextRetry}</th>
                <th scope="col">{t.webhooks.colError}</th>
                <th scope="col">{t.webhooks.colActions}</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((d) => (
                <tr key={d.id} data-testid="delivery">
                  <td data-label={t.webhooks.colEvent}>
                    <code>{d.id}</code>
                  </td>
                  <td data-label={t.webhooks.colType}>{d.type}</td>
                  <td data-label={t.webhooks.colStatus} className={`delivery-${d.status}`}>
                    {t.webhooks.statuses[d.status]}
                  </td>
                  <td data-label={t.webhooks.colCode}>{d.statusCode ?? '—'}</td>
                  <td data-label={t.webhooks.colAttempt}>{d.attempt}</td>
                  <td data-label={t.webhooks.colNextRetry}>
                    {d.nextRetryAt ? formatTime(d.nextRetryAt, locale) : '—'}
                  </td>
                  <td data-label={t.webhooks.colError} className="wrap">
                    {d.error ?? '—'}
                  </td>
                  <td data-label={t.webhooks.colActions}>
                    <button
                      type="button"
                      className="button small secondary"
                      aria-label={t.webhooks.redeliverLabel(d.id)}
                      onClick={() => void redeliver(d)}
                    >
                      {t.webhooks.redeliver}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function WebhookItem({ webhook, onChanged }: { webhook: Webhook; onChanged: () => Promise<void> }) {
  const { admin } = useHeraldClient();
  const t = useTexts();
  const locale = useLocale();
  const id = useId();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [showDeliveries, setShowDeliveries] = useState(false);
  const [refreshKey, setRefreshKey] = useState(0);

  const act = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      await work();
    } catch (err) {
      setError(errorMessage(err, t.webhooks.actionFailed, t));
    } finally {
      setBusy(false);
    }
  };

  const toggle = () =>
    act(async () => {
      await admin.webhooks.update(webhook.id, { enabled: !webhook.enabled });
      await onChanged();
    });
  const rotate = () =>
    act(async () => {
      setSecret(await admin.webhooks.rotateSecret(webhook.id));
    });
  const test = () =>
    act(async () => {
      const eventId = await admin.webhooks.sendTest(webhook.id);
      setNotice(t.webhooks.testQueued(eventId));
      // The admin wants to see it arrive: open the deliveries (or read them again).
      setShowDeliveries(true);
      setRefreshKey((n) => n + 1);
    });
  const remove = () =>
    act(async () => {
      setConfirmDelete(false);
      await admin.webhooks.remove(webhook.id);
      await onChanged();
    });

  return (
    <li>
      <article className="webhook" aria-labelledby={`${id}-url`}>
        <div className="webhook-head">
          <h3 id={`${id}-url`} className="wrap">
            {webhook.url}
          </h3>
          <span className={webhook.enabled ? 'badge good' : 'badge bad'}>
            {webhook.enabled ? t.webhooks.enabled : t.webhooks.disabled}
          </span>
        </div>
        {webhook.description ? <p>{webhook.description}</p> : null}
        <p className="muted">
          {webhook.events.join(', ')} · {t.webhooks.created(formatDateTime(webhook.createdAt, locale))}
        </p>
        <div className="actions">
          <button
            type="button"
            className="button small secondary"
            disabled={busy}
            aria-label={
              webhook.enabled ? t.webhooks.disableLabel(webhook.url) : t.webhooks.enableLabel(webhook.url)
            }
            onClick={() => void toggle()}
          >
            {webhook.enabled ? t.webhooks.disable : t.webhooks.enable}
          </button>
          <button
            type="button"
            className="button small secondary"
            disabled={busy}
            aria-label={t.webhooks.rotateLabel(webhook.url)}
            onClick={() => void rotate()}
          >
            {t.webhooks.rotate}
          </button>
          <button
            type="button"
            className="button small secondary"
            disabled={busy}
            aria-label={t.webhooks.testLabel(webhook.url)}
            onClick={() => void test()}
          >
            {t.webhooks.test}
          </button>
          <button
            type="button"
            className="button small secondary"
            aria-expanded={showDeliveries}
            aria-label={t.webhooks.showDeliveriesLabel(webhook.url)}
            onClick={() => setShowDeliveries((open) => !open)}
          >
            {showDeliveries ? t.webhooks.hideDeliveries : t.webhooks.showDeliveries}
          </button>
          {confirmDelete ? (
            // Deleting drops the queued deliveries too: asked twice.
            <span className="confirm">
              <button
                type="button"
                className="button small danger"
                disabled={busy}
                aria-label={t.webhooks.confirmRemoveLabel(webhook.url)}
                onClick={() => void remove()}
              >
                {t.webhooks.yesRemove}
              </button>
              <button
                type="button"
                className="button small secondary"
                onClick={() => setConfirmDelete(false)}
              >
                {t.common.cancel}
              </button>
            </span>
          ) : (
            <button
              type="button"
              className="button small danger"
              aria-label={t.webhooks.removeLabel(webhook.url)}
              onClick={() => setConfirmDelete(true)}
            >
              {t.webhooks.remove}
            </button>
          )}
        </div>
        <Alert>{error}</Alert>
        <Alert tone="success">{notice}</Alert>
        {secret ? (
          <ShownOnce
            heading={t.webhooks.newSecretHeading(webhook.url)}
            label={t.webhooks.secret}
            value={secret}
            warning={t.webhooks.rotated}
            copyLabel={t.webhooks.copySecret}
            onDone={() => setSecret(null)}
          />
        ) : null}
        {showDeliveries ? <Deliveries webhook={webhook} refreshKey={refreshKey} /> : null}
      </article>
    </li>
  );
}

export function AdminWebhooksPage() {
  const { admin } = useHeraldClient();
  const t = useTexts();
  const ids = useId();
  const [webhooks, setWebhooks] = useState<Webhook[] | null>(null);
  const [listError, setListError] = useState<unknown>(null);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<WebhookEventType[]>(['notification.created']);
  const [description, setDescription] = useState('');
  const [busy, setBusy] = useState(false);
  const [formError, setFormError] = useState<string | null>(null);
  const [created, setCreated] = useState<CreatedWebhook | null>(null);

  const load = useCallback(async () => {
    try {
      setWebhooks(await admin.webhooks.list());
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
    if (events.length === 0) {
      setFormError(t.webhooks.pickEvent);
      return;
    }
    setBusy(true);
    try {
      const text = description.trim();
      setCreated(
        await admin.webhooks.create({ url: url.trim(), events, ...(text ? { description: text } : {}) }),
      );
      setUrl('');
      setDescription('');
      await load();
    } catch (err) {
      setFormError(errorMessage(err, t.webhooks.createFailed, t));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="stack">
      <div className="card">
        <h1>{t.webhooks.title}</h1>
        <p className="muted">{t.webhooks.intro}</p>
        <h2>{t.webhooks.createHeading}</h2>
        <form onSubmit={(e) => void create(e)} className="stack form-top">
          <div className="field">
            <label htmlFor={`${ids}-url`}>{t.webhooks.url}</label>
            <input
              id={`${ids}-url`}
              type="url"
              required
              maxLength={2048}
              placeholder="https://…"
              autoComplete="off"
              value={url}
              onChange={(e) => setUrl(e.target.value)}
            />
          </div>
          <fieldset className="choices">
            <legend>{t.webhooks.events}</legend>
            {WEBHOOK_EVENT_TYPES.map((type) => (
              <label key={type} className="check">
                <input
                  type="checkbox"
                  checked={events.includes(type)}
                  onChange={(e) =>
                    setEvents(e.target.checked ? [...events, type] : events.filter((x) => x !== type))
                  }
                />
                <code>{type}</code>
              </label>
            ))}
          </fieldset>
          <div className="field">
            <label htmlFor={`${ids}-description`}>{t.webhooks.description}</label>
            <input
              id={`${ids}-description`}
              maxLength={500}
              value={description}
              onChange={(e) => setDescription(e.target.value)}
            />
          </div>
          <Alert>{formError}</Alert>
          <div className="actions">
            <button type="submit" className="button" disabled={busy}>
              {t.webhooks.create}
            </button>
          </div>
        </form>
        {created ? (
          <ShownOnce
            heading={t.webhooks.newSecretHeading(created.url)}
            label={t.webhooks.secret}
            value={created.secret}
            warning={t.webhooks.shownOnce}
            copyLabel={t.webhooks.copySecret}
            onDone={() => setCreated(null)}
          />
        ) : null}
      </div>

      <div className="card">
        <h2>{t.webhooks.listHeading}</h2>
        <Alert>{listError ? errorMessage(listError, t.webhooks.listFailed, t) : null}</Alert>
        {webhooks === null ? (
          listError ? null : (
            <p className="muted">{t.common.loading}</p>
          )
        ) : webhooks.length === 0 ? (
          <p className="muted">{t.webhooks.none}</p>
        ) : (
          <ul className="webhook-list" aria-label={t.webhooks.listHeading}>
            {webhooks.map((w) => (
              <WebhookItem key={w.id} webhook={w} onChanged={load} />
            ))}
          </ul>
        )}
      </div>
    </section>
  );
}
