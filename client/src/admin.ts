// Administrator calls of Herald's own routes (the better-auth admin plugin is on `client.auth.admin`).
import type {
  ApiKey,
  ApiKeyCreateRequest,
  ApiKeysResponse,
  BroadcastRequest,
  BroadcastResult,
  CreatedApiKey,
  CreatedWebhook,
  MetricsReport,
  PurgeMessagesResponse,
  Webhook,
  WebhookCreateRequest,
  WebhookDeliveriesResponse,
  WebhookDelivery,
  WebhooksResponse,
  WebhookUpdateRequest,
} from './contract.js';
import type { Http } from './http.js';

/** `client.admin.apiKeys`: keys for backends (CONTRACT §9; an admin session manages them). */
export interface ApiKeysAdminApi {
  /**
   * POST /admin/api-keys; the answer's `key` (`hk_…`) is shown only here: store it now.
   * @example
   * const { key } = await client.admin.apiKeys.create({ name: 'billing', scopes: ['notifications:send'] });
   */
  create(body: ApiKeyCreateRequest): Promise<CreatedApiKey>;
  /**
   * GET /admin/api-keys, newest first (never the keys themselves).
   * @example
   * const keys = await client.admin.apiKeys.list();
   */
  list(): Promise<ApiKey[]>;
  /**
   * DELETE /admin/api-keys/:id; the key stops working on every instance before this resolves.
   * @example
   * await client.admin.apiKeys.revoke(keyId);
   */
  revoke(id: string): Promise<void>;
}

/** `client.admin.webhooks`: endpoints that receive signed events (CONTRACT §9; an admin session). */
export interface WebhooksAdminApi {
  /**
   * POST /admin/webhooks; the answer's `secret` (`whsec_…`) is shown only here.
   * @example
   * const { id, secret } = await client.admin.webhooks.create({
   *   url: 'https://billing.example.com/hooks',
   *   events: ['notification.created'],
   * });
   */
  create(body: WebhookCreateRequest): Promise<CreatedWebhook>;
  /**
   * GET /admin/webhooks, newest first (never their secrets).
   * @example
   * const webhooks = await client.admin.webhooks.list();
   */
  list(): Promise<Webhook[]>;
  /**
   * PATCH /admin/webhooks/:id: change the URL, events or description, or enable/disable it.
   * @example
   * await client.admin.webhooks.update(webhookId, { enabled: false });
   */
  update(id: string, body: WebhookUpdateRequest): Promise<Webhook>;
  /**
   * DELETE /admin/webhooks/:id (its queued deliveries go with it).
   * @example
   * await client.admin.webhooks.remove(webhookId);
   */
  remove(id: string): Promise<void>;
  /**
   * POST /admin/webhooks/:id/rotate-secret; resolves with the new secret (shown only here). For 24 h deliveries
   * carry both signatures.
   * @example
   * const secret = await client.admin.webhooks.rotateSecret(webhookId);
   */
  rotateSecret(id: string): Promise<string>;
  /**
   * POST /admin/webhooks/:id/test: queues a `webhook.test` event; resolves with its event id (`webhook-id`).
   * @example
   * const eventId = await client.admin.webhooks.sendTest(webhookId);
   */
  sendTest(id: string): Promise<string>;
  /**
   * GET /admin/webhooks/:id/deliveries: the latest deliveries, newest first, each with its latest attempt.
   * @example
   * const deliveries = await client.admin.webhooks.deliveries(webhookId, { limit: 20 });
   */
  deliveries(id: string, opts?: { limit?: number }): Promise<WebhookDelivery[]>;
  /**
   * POST /admin/webhooks/:id/deliveries/:deliveryId/redeliver: the same event (same `webhook-id`) queued again.
   * @example
   * await client.admin.webhooks.redeliver(webhookId, delivery.id);
   */
  redeliver(id: string, deliveryId: string): Promise<void>;
}

/** `client.admin`: Herald's own admin routes (an admin session). */
export interface AdminApi {
  /**
   * POST /admin/notifications/send; `idempotencyKey` makes a retry return the first result without resending.
   * @example
   * const result = await client.admin.sendNotification(
   *   { target: { scope: 'all' }, notification: { type: 'announcement', title: 'Hello', content: 'Welcome!' } },
   *   { idempotencyKey: crypto.randomUUID() },
   * );
   */
  sendNotification(body: BroadcastRequest, opts?: { idempotencyKey?: string }): Promise<BroadcastResult>;
  /**
   * DELETE /admin/users/:id/messages; resolves with the number of chat messages deleted.
   * @example
   * const deleted = await client.admin.purgeMessages(userId);
   */
  purgeMessages(userId: string): Promise<number>;
  /**
   * GET /metrics (JSON).
   * @example
   * const { cluster } = await client.admin.metrics();
   */
  metrics(): Promise<MetricsReport>;
  /**
   * API keys for backends.
   * @example
   * const keys = await client.admin.apiKeys.list();
   */
  apiKeys: ApiKeysAdminApi;
  /**
   * Webhook endpoints and their deliveries.
   * @example
   * const webhooks = await client.admin.webhooks.list();
   */
  webhooks: WebhooksAdminApi;
}

export function createAdminApi(http: Http): AdminApi {
  const hook = (id: string) => `/admin/webhooks/${encodeURIComponent(id)}`;
  return {
    sendNotification: (body, opts) =>
      http.request<BroadcastResult>('POST', '/admin/notifications/send', {
        body,
        headers: opts?.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : undefined,
      }),
    purgeMessages: async (userId) =>
      (
        await http.request<PurgeMessagesResponse>(
          'DELETE',
          `/admin/users/${encodeURIComponent(userId)}/messages`,
        )
      ).deletedCount,
    metrics: () => http.request<MetricsReport>('GET', '/metrics'),
    apiKeys: {
      create: (body) => http.request<CreatedApiKey>('POST', '/admin/api-keys', { body }),
      list: async () => (await http.request<ApiKeysResponse>('GET', '/admin/api-keys')).apiKeys,
      revoke: async (id) => {
        await http.request('DELETE', `/admin/api-keys/${encodeURIComponent(id)}`);
      },
    },
    webhooks: {
      create: (body) => http.request<CreatedWebhook>('POST', '/admin/webhooks', { body }),
      list: async () => (await http.request<WebhooksResponse>('GET', '/admin/webhooks')).webhooks,
      update: (id, body) => http.request<Webhook>('PATCH', hook(id), { body }),
      remove: async (id) => {
        await http.request('DELETE', hook(id));
      },
      rotateSecret: async (id) =>
        (await http.request<{ secret: string }>('POST', `${hook(id)}/rotate-secret`)).secret,
      sendTest: async (id) => (await http.request<{ id: string }>('POST', `${hook(id)}/test`)).id,
      deliveries: async (id, opts) =>
        (
          await http.request<WebhookDeliveriesResponse>('GET', `${hook(id)}/deliveries`, {
            query: { limit: opts?.limit },
          })
        ).deliveries,
      redeliver: async (id, deliveryId) => {
        await http.request('POST', `${hook(id)}/deliveries/${encodeURIComponent(deliveryId)}/redeliver`);
      },
    },
  };
}
