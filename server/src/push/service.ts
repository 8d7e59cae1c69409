// Owns Web Push subscriptions (docs/api.md#web-push): subscribe (idempotent per endpoint; the endpoint's owner is
// whoever subscribed that browser last), list, remove, and the admin's view of a notification's push attempts.
// Endpoints are checked like webhook URLs (webhooks/ssrf.ts): https only, public addresses only, unless
// PUSH_ALLOW_PRIVATE_ENDPOINTS=true (which also allows http).
import { sql } from 'drizzle-orm';
import { validationError } from '../http/errors.js';
import { type Db, rowsOf } from '../infra/db.js';
import type { AddressCheck } from './ports.js';
import type { PushDeliveryView, SubscribeBody, SubscriptionView } from './schemas.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_USER_AGENT = 256;

export interface PushServiceDeps {
  db: Db;
  allowPrivate: boolean;
  /** The SSRF rules of webhook URLs (webhooks/ssrf.ts, wired in by app.ts). */
  checkAddress: AddressCheck;
  maxPerUser: number;
}

interface SubscriptionRow {
  id: string;
  endpoint: string;
  created_at: Date | string;
  updated_at: Date | string;
  expiration_time: Date | string | null;
  user_agent: string | null;
}

const iso = (v: Date | string) => (v instanceof Date ? v : new Date(v)).toISOString();

const view = (r: SubscriptionRow): SubscriptionView => ({
  id: r.id,
  endpoint: r.endpoint,
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
  expirationTime: r.expiration_time === null ? null : iso(r.expiration_time),
  userAgent: r.user_agent,
});

/** The endpoint as stored and its push service origin; 400 naming `endpoint` when it is not allowed. */
export async function checkEndpoint(
  raw: string,
  options: { allowPrivate: boolean; checkAddress: AddressCheck },
): Promise<{ endpoint: string; pushService: string }> {
  const refuse = (message: string) => validationError([{ path: 'endpoint', message }]);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse('must be an absolute https URL');
  }
  const httpOk = options.allowPrivate && url.protocol === 'http:';
  if (url.protocol !== 'https:' && !httpOk)
    throw refuse(
      options.allowPrivate
        ? 'must use http or https'
        : 'must use https (PUSH_ALLOW_PRIVATE_ENDPOINTS=true allows http in development)',
    );
  if (!url.hostname) throw refuse('must have a host');
  if (url.username || url.password) throw refuse('must not contain credentials');
  if (url.hash) throw refuse('must not contain a fragment');
  const refused = await options.checkAddress(url);
  if (refused) throw refuse(refused);
  return { endpoint: url.href, pushService: url.origin };
}

export function createPushService(deps: PushServiceDeps) {
  const { db } = deps;
  return {
    /** Stores (or re-owns) the browser's subscription; `created` false when the endpoint was already known. */
    async subscribe(
      userId: string,
      body: SubscribeBody,
      userAgent: string | undefined,
    ): Promise<{ subscription: SubscriptionView; created: boolean }> {
      const { endpoint, pushService } = await checkEndpoint(body.endpoint, deps);
      const expiration =
        body.expirationTime === null || body.expirationTime === undefined
          ? null
          : new Date(body.expirationTime).toISOString();
      const agent = userAgent ? userAgent.replaceAll('\u0000', '').slice(0, MAX_USER_AGENT) : null;
      // One statement: concurrent subscribes of one browser converge on one row (the unique endpoint), and the
      // last one owns it. Messages queued for a previous owner are never sent to it (the worker checks the
      // owner when it claims them).
      const [row] = rowsOf<SubscriptionRow & { inserted: boolean }>(
        await db.execute(sql`
          insert into push_subscription (user_id, endpoint, push_service, p256dh, auth, expiration_time, user_agent)
          values (${userId}, ${endpoint}, ${pushService}, ${body.keys.p256dh}, ${body.keys.auth},
            ${expiration}::timestamptz, ${agent})
          on conflict (endpoint) do update set user_id = excluded.user_id, p256dh = excluded.p256dh,
            auth = excluded.auth, expiration_time = excluded.expiration_time, user_agent = excluded.user_agent,
            updated_at = now()
          returning id::text as id, endpoint, created_at, updated_at, expiration_time, user_agent,
            (xmax = 0) as inserted`),
      );
      if (!row) throw new Error('push subscription upsert returned nothing');
      // A user's browsers are bounded: the least recently subscribed beyond the cap go (stale installs). The owner
      // is checked again on the row itself: the ids come from the statement's snapshot, and a row another user took
      // over meanwhile (the same browser, signed in as someone else) is re-checked only by the outer condition.
      await db.execute(sql`
        delete from push_subscription where user_id = ${userId} and id in (
          select id from push_subscription where user_id = ${userId}
          order by updated_at desc, id desc offset ${deps.maxPerUser})`);
      return { subscription: view(row), created: Boolean(row.inserted) };
    },

    async list(userId: string): Promise<SubscriptionView[]> {
      return rowsOf<SubscriptionRow>(
        await db.execute(sql`
          select id::text as id, endpoint, created_at, updated_at, expiration_time, user_agent
          from push_subscription where user_id = ${userId} order by updated_at desc, id desc`),
      ).map(view);
    },

    /** False when missing or another user's (the route answers 404 either way). */
    async remove(userId: string, id: string): Promise<boolean> {
      if (!UUID.test(id)) return false;
      // Its queued messages are settled as cancelled when the worker claims them (the subscription is gone).
      const removed = rowsOf<{ id: string }>(
        await db.execute(sql`
          delete from push_subscription where id = ${id}::uuid and user_id = ${userId} returning id::text as id`),
      );
      return removed.length > 0;
    },

    /** A notification's push attempts, one row per browser (admin view); empty for an unknown id. */
    async deliveries(notificationId: string, limit: number): Promise<PushDeliveryView[]> {
      if (!UUID.test(notificationId)) return [];
      const rows = rowsOf<{
        id: string;
        notification_id: string;
        user_id: string;
        subscription_id: string;
        push_service: string;
        status: PushDeliveryView['status'];
        last_status_code: number | null;
        attempts: number;
        next_attempt_at: Date | string;
        last_error: string | null;
        created_at: Date | string;
        last_attempt_at: Date | string | null;
        sent_at: Date | string | null;
      }>(
        await db.execute(sql`
          select id::text as id, notification_id::text as notification_id, user_id,
            subscription_id::text as subscription_id, push_service, status, last_status_code, attempts,
            next_attempt_at, last_error, created_at, last_attempt_at, sent_at
          from push_delivery where notification_id = ${notificationId}::uuid
          order by id limit ${limit}`),
      );
      return rows.map((r) => ({
        id: r.id,
        notificationId: r.notification_id,
        userId: r.user_id,
        subscriptionId: r.subscription_id,
        pushService: r.push_service,
        status: r.status,
        statusCode: r.last_status_code,
        attempts: r.attempts,
        nextRetryAt: r.status === 'pending' ? iso(r.next_attempt_at) : null,
        error: r.last_error,
        createdAt: iso(r.created_at),
        lastAttemptAt: r.last_attempt_at === null ? null : iso(r.last_attempt_at),
        sentAt: r.sent_at === null ? null : iso(r.sent_at),
      }));
    },
  };
}

export type PushService = ReturnType<typeof createPushService>;
