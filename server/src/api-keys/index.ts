// Registers the api-keys feature: the service (`app.apiKeys`, used by the routes that accept keys), its admin
// routes, and the shutdown flush of the batched last-use times.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { registerApiKeyRoutes } from './routes.js';
import {
  type ApiKeyPrincipal,
  type ApiKeyScope,
  type ApiKeyService,
  createApiKeyService,
} from './service.js';

export type { ApiKeyPrincipal, ApiKeyScope, ApiKeyService } from './service.js';
export { API_KEY_SCOPES } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Authenticates `Authorization: Bearer hk_…` for one scope (api-keys/service.ts). */
    apiKeys: ApiKeyService;
  }
  interface FastifyRequest {
    /** The API key that authenticated this request, when one did. */
    apiKey: ApiKeyPrincipal | null;
  }
}

export function registerApiKeys(app: FastifyInstance): void {
  const { config, database, store, logger, lifecycle } = app.ctx;
  const service = createApiKeyService({
    db: database.db,
    store,
    logger: logger.child({ component: 'api-keys' }),
    rateLimit: {
      max: config.API_KEY_RATE_LIMIT_MAX,
      windowMs: config.API_KEY_RATE_LIMIT_WINDOW_S * 1000,
      storeTimeoutMs: config.CACHE_COMMAND_TIMEOUT_MS,
    },
    flushMs: config.API_KEY_LAST_USED_FLUSH_MS,
  });
  app.decorate('apiKeys', service);
  app.decorateRequest('apiKey', null);
  registerApiKeyRoutes(app, service);
  // Before the database pool closes: the last batch of last-use times is written.
  lifecycle.onShutdown('close-connections', 'api-keys', () => service.close());
}

/** onRequest step for a route that takes a key: authenticates it for `scope` and records it on the request. */
export async function authenticateApiKey(
  app: FastifyInstance,
  request: FastifyRequest,
  scope: ApiKeyScope,
): Promise<void> {
  request.apiKey = await app.apiKeys.authenticate(request.headers.authorization, scope);
}
