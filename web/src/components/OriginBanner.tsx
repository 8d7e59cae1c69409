// Says so when the service does not trust the address this page was opened at: sign-in would answer "Invalid
// origin" and the chat socket would be refused. The message names the setting (CORS_ALLOWLISTED_ORIGINS).
import { originRefusedMessage } from '@herald/client';
import { useClientConfig } from '../client-config';

export function OriginBanner() {
  const origin = useClientConfig()?.origin;
  if (!origin || origin.trusted) return null;
  return (
    <p role="alert" className="origin-banner" data-testid="origin-banner">
      {originRefusedMessage(origin)}
    </p>
  );
}
