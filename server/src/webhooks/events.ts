// Owns which domain events webhooks offer and the webhooks' sink on the event port (events/outbox.ts): the
// writer's `events.write(tx, …)` reaches `write` here inside the transaction that made the change. One multi-row
// INSERT … SELECT per call fans each event out to the endpoints subscribed to its type; when no endpoint
// subscribes to any of the types (the usual case) nothing is queried at all, thanks to a per-instance cache of
// the subscribed types.
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { DomainEventType, EventSink } from '../events/outbox.js';
import { type Db, jsonb, rowsOf, storableJson } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';

export const WEBHOOK_EVENT_TYPES = [
  'notification.created',
  'notification.read',
  'email.sent',
  'email.failed',
  'chat.message.created',
  'user.created',
  'push.sent',
  'push.failed',
] as const satisfies readonly DomainEventType[];
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
const OFFERED: ReadonlySet<string> = new Set(WEBHOOK_EVENT_TYPES);

/** The bus topic telling every instance that the set of endpoints changed. */
export const WEBHOOKS_CHANGED_TOPIC = 'webhooks:changed';

export interface WebhookEvents extends EventSink {
  /** False when webhooks do not offer the type or no endpoint subscribes to it (then write queues nothing). */
  wants(type: DomainEventType): boolean;
  /** Queues the events for every endpoint subscribed to their type; returns how many deliveries were queued. */
  write: EventSink['write'];
  /** Re-reads the subscribed types (after a change here or on another instance). */
  refresh(): Promise<void>;
  /** Called after deliveries were queued on this instance (the worker sends them at once). */
  onQueued(listener: () => void): void;
  close(): void;
}

export function createWebhookEvents(deps: { db: Db; logger: Logger; refreshMs: number }): WebhookEvents {
  const { db, logger } = deps;
  // null = unknown (not loaded yet, or the database failed): then every event is offered to the INSERT, whose
  // join with the endpoint table decides; a cache may only ever skip work, never events.
  let subscribed: Set<string> | null = null;
  let generation = 0;
  const listeners: Array<() => void> = [];

  const refresh = async () => {
    const mine = ++generation;
    try {
      const rows = rowsOf<{ type: string }>(
        await db.execute(sql`select distinct unnest(events) as type from webhook_endpoint where enabled`),
      );
      // A slower, older read must not overwrite a newer one.
      if (mine === generation) subscribed = new Set(rows.map((r) => r.type));
    } catch (err) {
      if (mine === generation) subscribed = null;
      logger.warn({ err }, 'webhooks: could not read the subscribed event types');
    }
  };
  // The bus message of a change can be lost (store outage): the periodic re-read bounds how long an instance
  // keeps skipping a type some endpoint now subscribes to.
  const timer = setInterval(() => void refresh(), deps.refreshMs);
  timer.unref();

  const wants = (type: DomainEventType) => OFFERED.has(type) && (subscribed === null || subscribed.has(type));

  return {
    wants,
    refresh,
    async write(exec, events) {
      const wanted = events.filter((e) => wants(e.type));
      if (wanted.length === 0) return 0;
      const records = wanted.map((e) => {
        const at = e.at ?? new Date();
        // The body is fixed now: every retry sends (and signs) exactly these bytes. storableJson: lone surrogates
        // (from input) become U+FFFD, so receivers get well-formed Unicode, as the API returns the stored rows.
        const body = storableJson({ type: e.type, timestamp: at.toISOString(), data: e.data });
        return { event_id: `msg_${randomUUID().replaceAll('-', '')}`, type: e.type, body };
      });
      // FOR KEY SHARE: an endpoint whose DELETE commits while this statement runs is skipped (read committed
      // re-checks a locked row and drops it once deleted) instead of failing the foreign key and, with it, the
      // whole transaction of the cause: the notification, chat message or read mark that emitted the event.
      // The foreign-key check takes this same lock on each inserted row anyway.
      const rows = rowsOf<{ n: number }>(
        await exec.execute(sql`
          with q as (
            insert into webhook_delivery (endpoint_id, event_id, type, body)
            select e.id, x.event_id, x.type, x.body
            from jsonb_to_recordset(${jsonb(records)}) as x(event_id text, type text, body text)
            join webhook_endpoint e on x.type = any(e.events) and e.enabled
            for key share of e
            returning 1)
          select count(*)::int as n from q`),
      );
      const queued = Number(rows[0]?.n ?? 0);
      if (queued > 0) {
        // The caller's transaction may not have committed yet, so a worker round started at once can miss the
        // rows: a second nudge shortly after catches those without waiting for the poll.
        const notify = () => {
          for (const l of listeners) l();
        };
        setImmediate(notify);
        setTimeout(notify, 50).unref();
      }
      return queued;
    },
    onQueued(listener) {
      listeners.push(listener);
    },
    close() {
      clearInterval(timer);
    },
  };
}
