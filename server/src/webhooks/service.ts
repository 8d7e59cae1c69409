// Owns webhook endpoints: creation (URL checked against the SSRF rules, secret generated and sealed), listing
// (never the secret), deletion, and the delivery log (docs/api.md#webhooks).
import type { Db } from '../infra/db.js';
import type { WebhookEventType } from './events.js';
import {
  deleteEndpoint,
  findEndpoint,
  insertEndpoint,
  latestDeliveries,
  listEndpoints,
  type WebhookEndpointRow,
} from './repository.js';
import { generateSecret, type SecretBox } from './secret.js';
import { parseWebhookUrl, type Resolver, resolveTarget } from './ssrf.js';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface WebhookView {
  id: string;
  url: string;
  events: WebhookEventType[];
  description: string | null;
  createdAt: string;
}

export interface DeliveryView {
  id: string;
  type: WebhookEventType;
  status: 'pending' | 'delivered' | 'failed';
  statusCode: number | null;
  attempt: number;
  nextRetryAt: string | null;
  error: string | null;
  createdAt: string;
  lastAttemptAt: string | null;
  deliveredAt: string | null;
}

export interface WebhookServiceDeps {
  db: Db;
  secrets: SecretBox;
  allowPrivate: boolean;
  resolve: Resolver;
  /** Called after endpoints changed (tells every instance to re-read the subscribed types). */
  changed: () => Promise<void>;
}

const view = (row: WebhookEndpointRow): WebhookView => ({
  id: row.id,
  url: row.url,
  events: row.events as WebhookEventType[],
  description: row.description,
  createdAt: row.createdAt.toISOString(),
});

export function createWebhookService(deps: WebhookServiceDeps) {
  const { db } = deps;
  return {
    /** Throws UrlRefused when the URL is not allowed. */
    async create(
      input: { url: string; events: WebhookEventType[]; description?: string },
      createdBy: string | null,
    ): Promise<WebhookView & { secret: string }> {
      const url = parseWebhookUrl(input.url);
      await resolveTarget(url, { allowPrivate: deps.allowPrivate, resolve: deps.resolve });
      const secret = generateSecret();
      const row = await insertEndpoint(db, {
        url: url.toString(),
        events: [...new Set(input.events)],
        description: input.description ?? null,
        secret: deps.secrets.seal(secret),
        createdBy,
      });
      await deps.changed();
      return { ...view(row), secret };
    },
    async list(): Promise<WebhookView[]> {
      return (await listEndpoints(db)).map(view);
    },
    async remove(id: string): Promise<boolean> {
      if (!UUID_PATTERN.test(id)) return false;
      const removed = await deleteEndpoint(db, id);
      if (removed) await deps.changed();
      return removed;
    },
    /** null when there is no such endpoint. */
    async deliveries(id: string, limit: number): Promise<DeliveryView[] | null> {
      if (!UUID_PATTERN.test(id) || !(await findEndpoint(db, id))) return null;
      return (await latestDeliveries(db, id, limit)).map((d) => ({
        id: d.eventId,
        type: d.type as WebhookEventType,
        status: d.status as DeliveryView['status'],
        statusCode: d.lastStatusCode,
        attempt: d.attempts,
        nextRetryAt: d.status === 'pending' ? d.nextAttemptAt.toISOString() : null,
        error: d.lastError,
        createdAt: d.createdAt.toISOString(),
        lastAttemptAt: d.lastAttemptAt?.toISOString() ?? null,
        deliveredAt: d.deliveredAt?.toISOString() ?? null,
      }));
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
