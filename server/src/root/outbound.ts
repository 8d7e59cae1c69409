// Outbound HTTP for Web Push: the webhooks' pinned-address sender and SSRF rules serve push endpoints too (one
// mechanism for both), configured with push's own timeout and private-address switch.
import type { Config } from '../config.js';
import { createSender } from '../webhooks/sender.js';
import { type Resolver, resolveTarget, systemResolver, UrlRefused } from '../webhooks/ssrf.js';

export function pushTransport(config: Config, resolver: Resolver | undefined) {
  const resolve = resolver ?? systemResolver;
  const allowPrivate = config.PUSH_ALLOW_PRIVATE_ENDPOINTS;
  return {
    createSender: () => createSender({ timeoutMs: config.PUSH_TIMEOUT_MS, allowPrivate, resolve }),
    /** Null when the endpoint's address is allowed, else why it is refused. */
    checkAddress: async (url: URL): Promise<string | null> => {
      try {
        await resolveTarget(url, { allowPrivate, resolve });
        return null;
      } catch (err) {
        if (err instanceof UrlRefused) return err.message;
        throw err;
      }
    },
  };
}
