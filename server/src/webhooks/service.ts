// Owns webhook endpoints: creation (URL checked against the SSRF rules, secret generated and sealed), listing
// (never the secret), changes (URL, events, description, enabled), secret rotation, test events, deletion, the
// delivery log and redelivery (docs/api.md#webhooks).
import { randomUUID } from 'node:crypto';
import type { Db } from '../infra/db.js';
import type { WebhookEventType } from './events.js';
import {
  deleteEndpoint,
  findEndpoint,
  insertEndpoint,
  latestDeliveries,
  listEndpoints,
  queueDelivery,
  redeliver,
  rotateSecret,
  updateEndpoint,
  type WebhookEndpointRow,
} from './repository.js';
import { generateSecret, type SecretBox } from './secret.js';
import { parseWebhookUrl, type Resolver, resolveTarget } from './ssrf.js';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** How long the secret before a rotation keeps signing beside the new one (CONTRACT §9). */
export const ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

/** The type of the event `POST /admin/webhooks/:id/test` sends; not subscribable. */
export const TEST_EVENT_TYPE = 'webhook.test';

export interface WebhookView {
  id: string;
  url: string;
  events: WebhookEventType[];
  description: string | null;
  enabled: boolean;
  createdAt: string;
}

export interface DeliveryView {
  id: string;
  type: WebhookEventType | typeof TEST_EVENT_TYPE;
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
  /** Called after deliveries were queued outside the event port (the worker on this instance sends them at once). */
  queued: () => void;
}

const view = (row: WebhookEndpointRow): WebhookView => ({
  id: row.id,
  url: row.url,
  events: row.events as WebhookEventType[],
  description: row.description,
  enabled: row.enabled,
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
    /** null when there is no such endpoint; throws UrlRefused when a new URL is not allowed. */
    async update(
      id: string,
      patch: { url?: string; events?: WebhookEventType[]; description?: string | null; enabled?: boolean },
    ): Promise<WebhookView | null> {
      if (!UUID_PATTERN.test(id)) return null;
      const values: Parameters<typeof updateEndpoint>[2] = {};
      if (patch.url !== undefined) {
        const url = parseWebhookUrl(patch.url);
        await resolveTarget(url, { allowPrivate: deps.allowPrivate, resolve: deps.resolve });
        values.url = url.toString();
      }
      if (patch.events !== undefined) values.events = [...new Set(patch.events)];
      if (patch.description !== undefined) values.description = patch.description;
      if (patch.enabled !== undefined) values.enabled = patch.enabled;
      const row = await updateEndpoint(db, id, values);
      if (!row) return null;
      // Events, enabled and URL all change what instances offer or send: every instance re-reads.
      await deps.changed();
      return view(row);
    },
    /** The new secret, or null when there is no such endpoint. */
    async rotateSecret(id: string): Promise<string | null> {
      if (!UUID_PATTERN.test(id)) return null;
      const secret = generateSecret();
      if (!(await rotateSecret(db, id, deps.secrets.seal(secret), ROTATION_GRACE_MS))) return null;
      // Rows already claimed carry the secrets of their claim: handed back like after a PATCH, so every
      // delivery that starts after this returns is signed with the new secret too (and the previous one).
      await deps.changed();
      return secret;
    },
    /** Queues a webhook.test event for this endpoint alone; its event id, or null when there is no endpoint. */
    async sendTest(id: string): Promise<string | null> {
      if (!UUID_PATTERN.test(id)) return null;
      const endpoint = await findEndpoint(db, id);
      if (!endpoint) return null;
      const eventId = `msg_${randomUUID().replaceAll('-', '')}`;
      const body = JSON.stringify({
        type: TEST_EVENT_TYPE,
        timestamp: new Date().toISOString(),
        data: { webhookId: endpoint.id, url: endpoint.url },
      });
      await queueDelivery(db, { endpointId: endpoint.id, eventId, type: TEST_EVENT_TYPE, body });
      deps.queued();
      return eventId;
    },
    /** 'queued', or 'not_found' when the endpoint has no delivery with that event id. */
    async redeliver(id: string, eventId: string): Promise<'queued' | 'not_found'> {
      if (!UUID_PATTERN.test(id) || eventId.length > 100) return 'not_found';
      if (!(await redeliver(db, id, eventId))) return 'not_found';
      deps.queued();
      return 'queued';
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
        type: d.type as DeliveryView['type'],
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
