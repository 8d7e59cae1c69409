// Says so when the service does not trust the address this page was opened at: sign-in would answer "Invalid
// origin" and the chat socket would be refused. The message names the setting (CORS_ALLOWLISTED_ORIGINS); its
// English text is the SDK's originRefusedMessage().
import { useClientConfig } from '../client-config';
import { useTexts } from '../locale';

export function OriginBanner() {
  const origin = useClientConfig()?.origin;
  const t = useTexts();
  if (!origin || origin.trusted) return null;
  return (
    <p role="alert" className="origin-banner" data-testid="origin-banner">
      {t.common.originBanner(origin.value, origin.setting)}
    </p>
  );
}
