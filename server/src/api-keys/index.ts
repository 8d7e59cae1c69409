// Registers the api-keys feature: the service (returned; the routes that accept keys authenticate with it), its
// admin routes, and the shutdown flush of the batched last-use times.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { SessionResolver } from '../auth/guard.js';
import type { Config } from '../config.js';
import type { Database } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import type { ShutdownHooks } from '../infra/shutdown.js';
import type { Store } from '../infra/store.js';
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
  interface FastifyRequest {
    /** The API key that authenticated this request, when one did. */
    apiKey: ApiKeyPrincipal | null;
  }
}

export interface ApiKeysDeps {
  config: Config;
  logger: Logger;
  database: Database;
  store: Store;
  sessions: SessionResolver;
  lifecycle: ShutdownHooks;
}

/** Returns the service that authenticates `Authorization: Bearer hk_…` for one scope (api-keys/service.ts). */
export function registerApiKeys(app: FastifyInstance, deps: ApiKeysDeps): ApiKeyService {
  const { config, database, store, logger, lifecycle } = deps;
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
  app.decorateRequest('apiKey', null);
  registerApiKeyRoutes(app, service, deps.sessions);
  // Before the database pool closes: the last batch of last-use times is written.
  lifecycle.onShutdown('close-connections', 'api-keys', () => service.close());
  return service;
}

/**
 * preHandler step for a route with a body that takes a key: the key authenticated in onRequest (before the body,
 * so nobody without a key gets a large body read) is checked again once the body has arrived. A client can hold
 * a body back; without this, a request whose headers came before a revocation still acted after the DELETE
 * returned. Does nothing for a request authenticated otherwise.
 */
export async function confirmApiKey(apiKeys: ApiKeyService, request: FastifyRequest): Promise<void> {
  if (request.apiKey) await apiKeys.confirm(request.apiKey);
}

/** onRequest step for a route that takes a key: authenticates it for `scope` and records it on the request. */
export async function authenticateApiKey(
  apiKeys: ApiKeyService,
  request: FastifyRequest,
  scope: ApiKeyScope,
): Promise<void> {
  request.apiKey = await apiKeys.authenticate(request.headers.authorization, scope);
}
