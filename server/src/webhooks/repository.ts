// Owns the webhook_endpoint queries and the delivery log reads (infra/schema/webhooks.ts); the queue writes
// live with their callers (events.ts enqueues, worker.ts claims and records).
import { desc, eq } from 'drizzle-orm';
import type { Db } from '../infra/db.js';
import { webhookDelivery, webhookEndpoint } from '../infra/schema/index.js';

export type WebhookEndpointRow = typeof webhookEndpoint.$inferSelect;
export type WebhookDeliveryRow = typeof webhookDelivery.$inferSelect;

export async function insertEndpoint(
  db: Db,
  values: Pick<WebhookEndpointRow, 'url' | 'events' | 'description' | 'secret' | 'createdBy'>,
): Promise<WebhookEndpointRow> {
  const [row] = await db.insert(webhookEndpoint).values(values).returning();
  if (!row) throw new Error('webhook endpoint insert returned no row');
  return row;
}

export function listEndpoints(db: Db): Promise<WebhookEndpointRow[]> {
  return db.select().from(webhookEndpoint).orderBy(desc(webhookEndpoint.createdAt), desc(webhookEndpoint.id));
}

export async function findEndpoint(db: Db, id: string): Promise<WebhookEndpointRow | undefined> {
  const [row] = await db.select().from(webhookEndpoint).where(eq(webhookEndpoint.id, id)).limit(1);
  return row;
}

/** Deletes the endpoint and (cascade) its queued and logged deliveries. */
export async function deleteEndpoint(db: Db, id: string): Promise<boolean> {
  const rows = await db
    .delete(webhookEndpoint)
    .where(eq(webhookEndpoint.id, id))
    .returning({ id: webhookEndpoint.id });
  return rows.length > 0;
}

/** The endpoint's newest deliveries (each row carries its latest attempt). */
export function latestDeliveries(db: Db, endpointId: string, limit: number): Promise<WebhookDeliveryRow[]> {
  return db
    .select()
    .from(webhookDelivery)
    .where(eq(webhookDelivery.endpointId, endpointId))
    .orderBy(desc(webhookDelivery.createdAt), desc(webhookDelivery.id))
    .limit(limit);
}
