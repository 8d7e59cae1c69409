// Owns sending the queued push messages (docs/architecture.md, "Web Push"). Every instance runs one worker. A
// round claims due rows with a lease (FOR UPDATE SKIP LOCKED) and starts one request per row at once, up to
// PUSH_CONCURRENCY in flight, at most PUSH_CONCURRENCY_PER_SERVICE of them per push service (origin): the claim
// skips services already at their cap, so a slow or dead push service fills only its own slots while the others
// keep being served. Each request is bounded by PUSH_TIMEOUT_MS.
//
// Outcomes (RFC 8030 §7): 2xx sent; 404/410 the subscription is gone (removed, its other queued messages
// cancelled); 429, 5xx and network errors retried with backoff and jitter, never sooner than Retry-After, until
// the message is older than its TTL; any other answer failed, not retried.
import { sql } from 'drizzle-orm';
import { accountRelations } from '../auth/accounts.js';
import type { DomainEvent } from '../events/outbox.js';
import { type Db, jsonb, rowsOf, textArray } from '../infra/db.js';
import { deleteOlderThan, type HousekeepingTask } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import { backoffMs, createQueueLoop, dueAndUnleased, inMs } from '../infra/queue.js';
import { SpanKind, withSpan } from '../infra/tracing.js';
import { notificationRelations } from '../notifications/relations.js';
import type { MessageBuilder } from './message.js';
import { buildPayload, topicOf, urgencyOf } from './payload.js';
import type { PushEvents, PushSender, PushSendResult as SendResult } from './ports.js';

const MAX_BACKOFF_MS = 60 * 60 * 1000;
/** How long a stopping worker waits for its requests in flight. */
const STOP_GRACE_MS = 2_000;
/** Finished rows (the delivery log admins read) are kept this long. */
const FINISHED_KEEP_DAYS = 7;

export type PushStatus = 'pending' | 'sent' | 'failed' | 'gone' | 'cancelled';

export interface PushWorkerOptions {
  db: Db;
  logger: Logger;
  send: PushSender;
  builder: MessageBuilder;
  webhooks: PushEvents;
  feBaseUrl: string;
  ttlSeconds: number;
  pollMs: number;
  retryBaseMs: number;
  total: number;
  perService: number;
  /** How long a claimed row stays invisible to other workers; must exceed the request timeout. */
  leaseMs: number;
}

export interface PushQueueStats {
  /** Messages waiting (queue depth), cluster-wide. */
  pending: number;
  /** Messages accepted by a push service on this instance since it started. */
  sent: number;
  /** Failed attempts on this instance since it started (each retry counts). */
  attemptFailures: number;
  /** Messages given up on this instance since it started (4xx, expired, or subscription gone). */
  givenUp: number;
  /** Subscriptions removed on this instance after a 404/410 since it started. */
  subscriptionsRemoved: number;
}

interface Claimed {
  id: string;
  notification_id: string;
  subscription_id: string;
  user_id: string;
  push_service: string;
  attempts: number;
  created_at: Date | string;
  endpoint: string | null;
  p256dh: string | null;
  auth: string | null;
  n_type: string | null;
  title: string | null;
  content: string | null;
  metadata: Record<string, unknown> | null;
  n_created_at: Date | string | null;
  read: boolean | null;
  /** false: the user is banned (or gone) since the message was queued. */
  recipient_active: boolean;
}

interface Outcome {
  status: PushStatus;
  statusCode: number | null;
  error: string | null;
}

const iso = (v: Date | string) => (v instanceof Date ? v : new Date(v)).toISOString();

/** Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP date; ms from now, or 0 when absent/unparsable. */
export function retryAfterMs(header: string | undefined, now = Date.now()): number {
  if (!header) return 0;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? 0 : Math.max(0, at - now);
}

/** What a push service's answer means for the message (RFC 8030 §5, §7.3, §8.3). */
export function classify(result: SendResult): 'sent' | 'gone' | 'retry' | 'failed' {
  if (result.ok) return 'sent';
  const code = result.statusCode;
  if (code === 404 || code === 410) return 'gone';
  if (result.refused) return 'failed';
  if (code === null || code === 429 || code >= 500) return 'retry';
  return 'failed';
}

export function createPushWorker(options: PushWorkerOptions) {
  const { db, logger } = options;
  const ttlMs = options.ttlSeconds * 1000;
  const inflightByService = new Map<string, number>();
  let inflight = 0;
  const sends = new Set<Promise<void>>();
  const counters = { sent: 0, attemptFailures: 0, givenUp: 0, subscriptionsRemoved: 0 };

  const claim = async (limit: number): Promise<Claimed[]> => {
    const busy: Record<string, number> = Object.fromEntries(inflightByService);
    const saturated = [...inflightByService].filter(([, n]) => n >= options.perService).map(([s]) => s);
    // Candidates first (the oldest due rows of services with free slots), then at most the free slots of each
    // service among them: the window function runs over a bounded set, never the whole queue.
    return rowsOf<Claimed>(
      await db.execute(sql`
        with busy as (
          select key as service, value::int as n from jsonb_each_text(${jsonb(busy)})),
        cand as (
          select d.id, d.push_service, d.next_attempt_at, d.subscription_id, d.notification_id, d.user_id
          from push_delivery d
          where ${dueAndUnleased('d')} and d.push_service <> all(${textArray(saturated)})
          order by d.next_attempt_at, d.id
          limit ${Math.min(limit * 4, 4_000)}
          for update skip locked),
        picked as (
          select x.* from (
            select c.*, row_number() over (partition by c.push_service order by c.next_attempt_at, c.id) as rn
            from cand c) x
          left join busy b on b.service = x.push_service
          where x.rn + coalesce(b.n, 0) <= ${options.perService}
          order by x.next_attempt_at, x.id
          limit ${limit})
        update push_delivery d
        set attempts = d.attempts + 1, locked_until = ${inMs(options.leaseMs)}, last_attempt_at = now()
        from picked p
        left join push_subscription s on s.id = p.subscription_id and s.user_id = p.user_id
        left join ${notificationRelations.contents} n on n.id = p.notification_id
        left join ${accountRelations.unbanned} u on u.id = p.user_id
        where d.id = p.id
        returning d.id::text as id, d.notification_id::text as notification_id,
          d.subscription_id::text as subscription_id, d.user_id, d.push_service, d.attempts, d.created_at,
          s.endpoint, s.p256dh, s.auth, n.type as n_type, n.title, n.content, n.metadata,
          n.created_at as n_created_at, n.read, u.id is not null as recipient_active`),
    );
  };

  const eventFor = (row: Claimed, outcome: Outcome): DomainEvent => ({
    type: outcome.status === 'sent' ? 'push.sent' : 'push.failed',
    data: {
      id: row.id,
      notificationId: row.notification_id,
      userId: row.user_id,
      subscriptionId: row.subscription_id,
      pushService: row.push_service,
      status: outcome.status,
      statusCode: outcome.statusCode,
      attempts: row.attempts,
      error: outcome.error,
    },
  });

  // Successes are written in batches: one statement (and one webhook INSERT) for every message that finished
  // while the previous write ran (at least once: a success lost to a crash is sent again, and the push service
  // replaces it by its Topic if the browser has not fetched it yet).
  let succeeded: Array<{ row: Claimed; code: number | null; at: string }> = [];
  let writing: Promise<void> | undefined;
  const writeSucceeded = (): Promise<void> => {
    if (writing) return writing;
    writing = (async () => {
      while (succeeded.length > 0) {
        const batch = succeeded;
        succeeded = [];
        const records = jsonb(batch.map((b) => ({ id: b.row.id, code: b.code, at: b.at })));
        const update = sql`
          update push_delivery d set status = 'sent', sent_at = x.at, locked_until = null,
            last_status_code = x.code, last_error = null
          from jsonb_to_recordset(${records}) as x(id bigint, code int, at timestamptz)
          where d.id = x.id and d.status = 'pending'`;
        try {
          if (options.webhooks.wants('push.sent')) {
            await db.transaction(async (tx) => {
              await tx.execute(update);
              await options.webhooks.write(
                tx,
                batch.map((b) => eventFor(b.row, { status: 'sent', statusCode: b.code, error: null })),
              );
            });
          } else await db.execute(update);
        } catch (err) {
          // The leases expire and the rows are sent again: at least once.
          logger.warn({ err, messages: batch.length }, 'push deliveries not recorded');
        }
      }
    })().finally(() => {
      writing = undefined;
    });
    return writing;
  };

  /** A final outcome other than success: the row's state and its push.failed event commit together. */
  const settleFinal = async (row: Claimed, outcome: Outcome) => {
    counters.givenUp++;
    const update = sql`
      update push_delivery set status = ${outcome.status}, locked_until = null,
        last_status_code = ${outcome.statusCode}, last_error = ${(outcome.error ?? '').slice(0, 500) || null}
      where id = ${row.id}::bigint and status = 'pending'`;
    await db.transaction(async (tx) => {
      await tx.execute(update);
      if (outcome.status === 'gone') {
        // The browser unsubscribed or the push service expired it (RFC 8030 §7.3): forget it. Messages still
        // queued for it are settled as cancelled when claimed, without a request.
        await tx.execute(sql`delete from push_subscription where id = ${row.subscription_id}::uuid`);
      }
      if (options.webhooks.wants('push.failed')) await options.webhooks.write(tx, [eventFor(row, outcome)]);
    });
    if (outcome.status === 'gone') counters.subscriptionsRemoved++;
  };

  const settleRetry = async (row: Claimed, result: SendResult) => {
    const delay = Math.max(
      backoffMs(row.attempts, options.retryBaseMs, MAX_BACKOFF_MS),
      retryAfterMs(result.retryAfter),
    );
    const expiresAt = new Date(row.created_at).getTime() + ttlMs;
    if (Date.now() + delay > expiresAt) {
      // The push service would drop it by now anyway (its TTL has passed).
      await settleFinal(row, {
        status: 'failed',
        statusCode: result.statusCode,
        error: `expired after ${row.attempts} attempts (${result.error ?? 'failed'})`,
      });
      return;
    }
    await db.execute(sql`
      update push_delivery set locked_until = null, last_status_code = ${result.statusCode},
        last_error = ${(result.error ?? 'failed').slice(0, 500)}, next_attempt_at = ${inMs(delay)}
      where id = ${row.id}::bigint and status = 'pending'`);
  };

  const deliver = async (row: Claimed) => {
    if (row.endpoint === null || row.p256dh === null || row.auth === null) {
      // Unsubscribed, removed, or moved to another user since it was queued: never show it on that browser.
      await settleFinal(row, { status: 'cancelled', statusCode: null, error: 'subscription removed' });
      return;
    }
    if (row.n_type === null || row.n_created_at === null) {
      await settleFinal(row, { status: 'cancelled', statusCode: null, error: 'notification deleted' });
      return;
    }
    if (row.read) {
      await settleFinal(row, { status: 'cancelled', statusCode: null, error: 'read before it was sent' });
      return;
    }
    if (!row.recipient_active) {
      // Banned since it was queued: a ban stops what reaches the user's browsers too (chat messages included).
      await settleFinal(row, { status: 'cancelled', statusCode: null, error: 'user banned' });
      return;
    }
    const ageMs = Date.now() - new Date(row.created_at).getTime();
    let result: SendResult;
    try {
      const request = options.builder.build(
        { endpoint: row.endpoint, p256dh: row.p256dh, auth: row.auth },
        buildPayload(
          {
            id: row.notification_id,
            type: row.n_type,
            title: row.title ?? '',
            content: row.content ?? '',
            metadata: row.metadata,
            createdAt: iso(row.n_created_at),
          },
          options.feBaseUrl,
        ),
        {
          // A retry asks the push service to keep it only for what is left of its lifetime.
          ttlSeconds: Math.max(0, Math.floor((ttlMs - ageMs) / 1000)),
          urgency: urgencyOf(row.metadata),
          topic: topicOf(row.notification_id),
        },
      );
      result = await options.send({
        url: row.endpoint,
        headers: request.headers,
        body: request.body,
        contentType: 'application/octet-stream',
        userAgent: 'Herald-Push/1',
      });
    } catch (err) {
      // The library refused the subscription's keys (they were checked on subscribe; defensive).
      result = { ok: false, statusCode: null, error: (err as Error).message, refused: true };
    }
    const kind = classify(result);
    if (kind === 'sent') {
      counters.sent++;
      succeeded.push({ row, code: result.statusCode, at: new Date().toISOString() });
      await writeSucceeded();
      return;
    }
    counters.attemptFailures++;
    logger.info(
      { deliveryId: row.id, pushService: row.push_service, attempts: row.attempts, err: result.error, kind },
      'push attempt failed',
    );
    if (kind === 'retry') await settleRetry(row, result);
    else
      await settleFinal(row, {
        status: kind === 'gone' ? 'gone' : 'failed',
        statusCode: result.statusCode,
        error: result.error,
      });
  };

  const dispatch = (row: Claimed) => {
    inflightByService.set(row.push_service, (inflightByService.get(row.push_service) ?? 0) + 1);
    inflight++;
    // One span per attempt (a queue consumer, as for emails and webhooks): the request to the push service and the
    // queries that record its outcome are its children.
    const p = withSpan(
      'push.send',
      {
        'herald.push.delivery_id': row.id,
        'herald.push.subscription_id': row.subscription_id,
        'herald.push.service': row.push_service,
        'herald.push.attempt': Number(row.attempts),
      },
      () => deliver(row),
      SpanKind.CONSUMER,
    )
      .catch((err: unknown) => {
        // The lease expires and the row is sent again: at least once.
        logger.warn({ err, deliveryId: row.id }, 'push outcome not recorded');
      })
      .finally(() => {
        const n = (inflightByService.get(row.push_service) ?? 1) - 1;
        if (n <= 0) inflightByService.delete(row.push_service);
        else inflightByService.set(row.push_service, n);
        inflight--;
        sends.delete(p);
        // Half the slots are free: claim more now rather than at the next poll. Waiting for half (not one) makes
        // each claim statement feed many sends instead of one.
        if (!loop.stopped && inflight <= Math.floor(options.total / 2)) loop.kick();
      });
    sends.add(p);
  };

  const loop = createQueueLoop({
    name: 'push worker',
    pollMs: options.pollMs,
    logger,
    round: async () => {
      while (!loop.stopped) {
        const free = options.total - inflight;
        if (free <= 0) return;
        const rows = await claim(free);
        for (const row of rows) dispatch(row);
        if (rows.length < free) return;
      }
    },
  });

  return {
    start() {
      loop.start();
    },
    kick: () => loop.kick(),
    async stats(): Promise<PushQueueStats> {
      const [row] = rowsOf<{ n: string | number }>(
        await db.execute(sql`select count(*) as n from push_delivery where status = 'pending'`),
      );
      return { pending: Number(row?.n ?? 0), ...counters };
    },
    /**
     * Stops claiming and gives the requests in flight a short grace to finish and be recorded. One still running
     * after it is not waited for: its lease expires and another instance sends it again (at least once).
     */
    async stop() {
      await loop.stop();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...sends]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, STOP_GRACE_MS);
        }),
      ]);
      clearTimeout(timer);
      await writeSucceeded();
      options.send.close();
    },
  };
}

export type PushWorker = ReturnType<typeof createPushWorker>;

/** The delivery log's housekeeping (a task of the shared scheduler): finished rows are kept FINISHED_KEEP_DAYS. */
export const pushDeliveryRetentionTask = (): HousekeepingTask =>
  deleteOlderThan({
    owner: 'push',
    countName: 'pushDeliveriesDeleted',
    statement: sql`delete from push_delivery where status <> 'pending'
                   and created_at < now() - make_interval(days => ${FINISHED_KEEP_DAYS}::int) returning 1`,
  });
