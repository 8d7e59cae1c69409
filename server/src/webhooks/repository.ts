// Owns the webhook_endpoint queries and the delivery log reads (infra/schema/webhooks.ts); the queue writes
// live with their callers (events.ts enqueues, worker.ts claims and records).
import { and, desc, eq, sql } from 'drizzle-orm';
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

export async function updateEndpoint(
  db: Db,
  id: string,
  values: Partial<Pick<WebhookEndpointRow, 'url' | 'events' | 'description' | 'enabled'>>,
): Promise<WebhookEndpointRow | undefined> {
  const [row] = await db.update(webhookEndpoint).set(values).where(eq(webhookEndpoint.id, id)).returning();
  return row;
}

/** Replaces the secret; the old one keeps signing (beside the new) until `graceMs` from now. */
export async function rotateSecret(
  db: Db,
  id: string,
  sealedSecret: string,
  graceMs: number,
): Promise<boolean> {
  const rows = await db
    .update(webhookEndpoint)
    .set({
      previousSecret: sql`${webhookEndpoint.secret}`,
      previousSecretExpiresAt: sql`now() + ${graceMs} * interval '1 millisecond'`,
      secret: sealedSecret,
    })
    .where(eq(webhookEndpoint.id, id))
    .returning({ id: webhookEndpoint.id });
  return rows.length > 0;
}

/** Queues one event for one endpoint, whatever it subscribes to (the test event). */
export async function queueDelivery(
  db: Db,
  values: { endpointId: string; eventId: string; type: string; body: string },
): Promise<void> {
  await db.insert(webhookDelivery).values(values);
}

/**
 * Makes a logged delivery due again with the same event id and body (so the same `webhook-id`): a fresh attempt
 * count and retry window. False when the endpoint has no such delivery.
 */
export async function redeliver(db: Db, endpointId: string, eventId: string): Promise<boolean> {
  const rows = await db
    .update(webhookDelivery)
    .set({
      status: 'pending',
      attempts: 0,
      nextAttemptAt: sql`now()`,
      lockedUntil: null,
      createdAt: sql`now()`,
      deliveredAt: null,
    })
    .where(and(eq(webhookDelivery.endpointId, endpointId), eq(webhookDelivery.eventId, eventId)))
    .returning({ id: webhookDelivery.id });
  return rows.length > 0;
}
