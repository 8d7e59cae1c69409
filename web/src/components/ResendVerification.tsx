// "Resend verification email": asks the service for a new link (better-auth's send-verification-email), and says
// where it went (the inbox, or the service's log when no SMTP server is configured).
import { useHeraldClient } from '@herald/client/react';
import { useState } from 'react';
import { useClientConfig } from '../client-config';
import { errorMessage } from '../format';
import { useTexts } from '../locale';

export function ResendVerification({ email }: { email: string }) {
  const client = useHeraldClient();
  const config = useClientConfig();
  const t = useTexts();
  const [state, setState] = useState<'idle' | 'busy' | 'sent'>('idle');
  const [error, setError] = useState<string | null>(null);

  const resend = async () => {
    setState('busy');
    setError(null);
    const result = await client.auth.sendVerificationEmail({ email });
    if (result.error) {
      setState('idle');
      setError(errorMessage(result.error, t.resend.failed, t));
      return;
    }
    setState('sent');
  };

  return (
    <div className="resend">
      <button
        type="button"
        className="button secondary"
        disabled={state === 'busy'}
        onClick={() => void resend()}
      >
        {t.resend.button}
      </button>
      {state === 'sent' ? (
        <p role="status">{config?.emailDelivery === 'log' ? t.resend.sentLog : t.resend.sentTo(email)}</p>
      ) : null}
      {error ? (
        <p role="alert" className="error">
          {error}
        </p>
      ) : null}
    </div>
  );
}
