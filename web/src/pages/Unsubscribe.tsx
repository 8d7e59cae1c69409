// The confirmation page behind an email's unsubscribe link (GET /notification/unsubscribe redirects here): it
// changes nothing until the button is pressed, then POSTs the signed token like a one-click mailbox would.
import { useState } from 'react';
import { apiBaseUrl } from '../client';
import { Alert } from '../components/Form';
import { useTexts } from '../locale';
import { Link, useLocation } from '../router';
import { typeLabel } from '../types';

/** What the token names (its payload is signed, not secret); null when it cannot be read. */
function tokenScope(token: string): { type: string | null } | null {
  try {
    const body = token.split('.')[0] ?? '';
    const json = JSON.parse(atob(body.replace(/-/g, '+').replace(/_/g, '/'))) as { t?: unknown };
    if (typeof json.t !== 'string') return null;
    return { type: json.t === '*' ? null : json.t };
  } catch {
    return null;
  }
}

export function UnsubscribePage() {
  const { query } = useLocation();
  const token = query.get('token') ?? '';
  // A visitor from an email link is usually signed out: the browser's language, or the user's when signed in.
  const t = useTexts();
  const scope = tokenScope(token);
  const [state, setState] = useState<'ask' | 'busy' | 'done' | 'invalid' | 'expired' | 'failed'>(
    scope ? 'ask' : 'invalid',
  );

  const confirm = async () => {
    setState('busy');
    try {
      const res = await fetch(`${apiBaseUrl()}/notification/unsubscribe?token=${encodeURIComponent(token)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'List-Unsubscribe=One-Click',
      });
      if (res.ok) setState('done');
      else if (res.status === 410) setState('expired');
      else if (res.status === 400) setState('invalid');
      else setState('failed');
    } catch {
      setState('failed');
    }
  };

  const question = scope?.type ? t.unsubscribeType(typeLabel(scope.type, t)) : t.unsubscribeAll;
  return (
    <section className="card narrow">
      <h1>{t.unsubscribeTitle}</h1>
      {state === 'ask' || state === 'busy' ? (
        <>
          <p>{question}</p>
          <div className="actions">
            <button
              type="button"
              className="button"
              disabled={state === 'busy'}
              onClick={() => void confirm()}
            >
              {t.unsubscribeButton}
            </button>
          </div>
        </>
      ) : null}
      <Alert tone="success">{state === 'done' ? t.unsubscribeDone : null}</Alert>
      <Alert>
        {state === 'invalid'
          ? t.unsubscribeInvalid
          : state === 'expired'
            ? t.unsubscribeExpired
            : state === 'failed'
              ? t.unsubscribeFailed
              : null}
      </Alert>
      <p className="muted">
        <Link to="/preferences">{t.preferencesLink}</Link>
      </p>
    </section>
  );
}
