// Owns sending the queued deliveries (docs/architecture.md, "Webhooks"). Every instance runs one worker. A
// round claims due rows with a lease (FOR UPDATE SKIP LOCKED), round-robin across endpoints — each endpoint's
// first due row, then each one's second, … — into a small per-endpoint buffer (PREFETCH send slots' worth, so
// one claim feeds many sends); each endpoint's WEBHOOK_CONCURRENCY_PER_ENDPOINT send slots take rows from its
// own buffer. Sends are not awaited by the round: a slow or dead endpoint fills its own slots and buffer and is
// skipped by later claims, while every other endpoint keeps being served.
import { sql } from 'drizzle-orm';
import { type Db, jsonb, rowsOf } from '../infra/db.js';
import { deleteOlderThan, type HousekeepingTask } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import { backoffMs, createQueueLoop, dueAndUnleased, inMs } from '../infra/queue.js';
import { SpanKind, withSpan } from '../infra/tracing.js';
import type { SecretBox } from './secret.js';
import { sign } from './secret.js';
import type { Sender } from './sender.js';

const MAX_BACKOFF_MS = 60 * 60 * 1000;
/** Rows claimed ahead per send slot: one claim statement then feeds several sends. */
export const PREFETCH = 4;
/** How long a stopping worker waits for its sends in flight. */
const STOP_GRACE_MS = 2_000;

export interface WebhookWorkerOptions {
  db: Db;
  logger: Logger;
  send: Sender;
  secrets: SecretBox;
  pollMs: number;
  retryBaseMs: number;
  /** A failing delivery is retried until it is this old, then marked failed. */
  retryWindowMs: number;
  perEndpoint: number;
  total: number;
  /** How long a claimed row stays invisible to other workers; must exceed the send timeout. */
  leaseMs: number;
}

export interface WebhookQueueStats {
  /** Deliveries waiting (queue depth), cluster-wide. */
  pending: number;
  /** Deliveries given up after the retry window (kept 7 days), cluster-wide. */
  failed: number;
  /** Deliveries that got a 2xx (kept 7 days), cluster-wide. */
  delivered: number;
  /** Failed attempts on this instance since it started (each retry counts). */
  attemptFailures: number;
}

interface Claimed {
  id: string;
  endpoint_id: string;
  event_id: string;
  body: string;
  attempts: number;
  url: string;
  secret: string;
  /** The secret before a rotation, while it is still honoured (null otherwise). */
  previous_secret: string | null;
  /**
   * This claim's lease end in epoch microseconds: the claim's token. An outcome is written only while the row
   * still carries it, so an attempt that a redelivery (or an expired lease and a new claim) overtook cannot
   * mark the newer one delivered or reschedule it.
   */
  lease: string;
}

/** The row still holds the claim it was sent under (see `Claimed.lease`). */
const stillClaimed = (alias: string, lease: ReturnType<typeof sql>) =>
  sql`(extract(epoch from ${sql.raw(alias)}.locked_until) * 1000000)::bigint = ${lease}`;

export function createWebhookWorker(options: WebhookWorkerOptions) {
  const { db, logger } = options;
  const inflight = new Map<string, number>();
  /** Claimed rows waiting for a send slot of their endpoint. */
  const buffers = new Map<string, Claimed[]>();
  /** Bumped by reclaim(): a claim that ran across an endpoint change hands its rows back. */
  let generation = 0;
  let total = 0;
  let buffered = 0;
  let attemptFailures = 0;
  const sends = new Set<Promise<void>>();
  const perEndpointHeld = options.perEndpoint * PREFETCH;

  const claim = async (limit: number): Promise<Claimed[]> => {
    // Rows this instance already holds per endpoint (in flight or buffered).
    const busy: Record<string, number> = {};
    for (const [id, n] of inflight) busy[id] = n;
    for (const [id, rows] of buffers) busy[id] = (busy[id] ?? 0) + rows.length;
    return rowsOf<Claimed>(
      await db.execute(sql`
        with busy as (
          select key::uuid as endpoint_id, value::int as n from jsonb_each_text(${jsonb(busy)})),
        picked as (
          select x.id from (
            select d.id, d.next_attempt_at, coalesce(b.n, 0) as n,
              row_number() over (partition by e.id order by d.next_attempt_at, d.id) as rn
            from webhook_endpoint e
            left join busy b on b.endpoint_id = e.id
            cross join lateral (
              select w.id, w.next_attempt_at from webhook_delivery w
              where w.endpoint_id = e.id and ${dueAndUnleased('w')}
              order by w.next_attempt_at, w.id
              limit ${perEndpointHeld}
              for update skip locked) d
            where e.enabled
          ) x
          where x.rn + x.n <= ${perEndpointHeld}
          order by x.rn, x.next_attempt_at, x.id
          limit ${limit})
        update webhook_delivery w
        set attempts = w.attempts + 1, locked_until = ${inMs(options.leaseMs)}, last_attempt_at = now()
        from picked, webhook_endpoint e
        where w.id = picked.id and e.id = w.endpoint_id
        returning w.id::text as id, w.endpoint_id::text as endpoint_id, w.event_id, w.body, w.attempts,
          e.url, e.secret,
          (extract(epoch from w.locked_until) * 1000000)::bigint::text as lease,
          case when e.previous_secret_expires_at > now() then e.previous_secret end as previous_secret`),
    );
  };

  // Successes are written in batches: one statement for every delivery that finished while the previous write
  // ran (at least once: a success lost to a crash before its write is simply sent again).
  let delivered: Array<{ id: string; lease: string; code: number | null; at: string }> = [];
  let writing: Promise<void> | undefined;
  const writeDelivered = (): Promise<void> => {
    if (writing) return writing;
    writing = (async () => {
      while (delivered.length > 0) {
        const batch = delivered;
        delivered = [];
        try {
          await db.execute(sql`
            update webhook_delivery w set status = 'delivered', delivered_at = x.at, locked_until = null,
              last_status_code = x.code, last_error = null
            from jsonb_to_recordset(${jsonb(batch)}) as x(id bigint, lease bigint, code int, at timestamptz)
            where w.id = x.id and w.status = 'pending' and ${stillClaimed('w', sql`x.lease`)}`);
        } catch (err) {
          // The leases expire and the rows are sent again: at least once.
          logger.warn({ err, deliveries: batch.length }, 'webhook deliveries not recorded');
        }
      }
    })().finally(() => {
      writing = undefined;
    });
    return writing;
  };

  const record = async (
    row: Claimed,
    result: { ok: boolean; statusCode: number | null; error: string | null },
  ) => {
    if (result.ok) {
      delivered.push({ id: row.id, lease: row.lease, code: result.statusCode, at: new Date().toISOString() });
      await writeDelivered();
      return;
    }
    attemptFailures++;
    const delay = backoffMs(row.attempts, options.retryBaseMs, MAX_BACKOFF_MS);
    const window = `${options.retryWindowMs} milliseconds`;
    logger.info(
      { deliveryId: row.id, endpointId: row.endpoint_id, attempts: row.attempts, err: result.error },
      'webhook delivery attempt failed',
    );
    await db.execute(sql`
      update webhook_delivery set locked_until = null, last_status_code = ${result.statusCode},
        last_error = ${(result.error ?? 'failed').slice(0, 500)},
        status = case when created_at + ${window}::interval <= now() then 'failed' else 'pending' end,
        next_attempt_at = ${inMs(delay)}
      where id = ${row.id}::bigint and status = 'pending' and ${stillClaimed('webhook_delivery', sql`${row.lease}::bigint`)}`);
  };

  const deliver = async (row: Claimed) => {
    let result: { ok: boolean; statusCode: number | null; error: string | null };
    try {
      const secret = options.secrets.open(row.secret);
      const timestamp = Math.floor(Date.now() / 1000);
      result = await options.send({
        url: row.url,
        body: row.body,
        headers: {
          'webhook-id': row.event_id,
          'webhook-timestamp': String(timestamp),
          // During a rotation both signatures, the old one first (Standard Webhooks: space-separated list).
          'webhook-signature':
            row.previous_secret === null
              ? sign(secret, row.event_id, timestamp, row.body)
              : `${sign(options.secrets.open(row.previous_secret), row.event_id, timestamp, row.body)} ${sign(secret, row.event_id, timestamp, row.body)}`,
        },
      });
    } catch (err) {
      result = { ok: false, statusCode: null, error: (err as Error).message };
    }
    try {
      await record(row, result);
    } catch (err) {
      // The lease expires and the row is sent again: at least once.
      logger.warn({ err, deliveryId: row.id }, 'webhook delivery outcome not recorded');
    }
  };

  /** Starts sends for the endpoint while it has free slots and buffered rows. */
  const pump = (endpointId: string) => {
    const buffer = buffers.get(endpointId);
    while (buffer && buffer.length > 0 && (inflight.get(endpointId) ?? 0) < options.perEndpoint) {
      const row = buffer.shift() as Claimed;
      buffered--;
      if (buffer.length === 0) buffers.delete(endpointId);
      dispatch(row);
    }
  };

  const dispatch = (row: Claimed) => {
    inflight.set(row.endpoint_id, (inflight.get(row.endpoint_id) ?? 0) + 1);
    total++;
    // One span per attempt (a queue consumer): the HTTP request to the endpoint and the bookkeeping queries are
    // its children.
    const p = withSpan(
      'webhook.deliver',
      {
        'herald.webhook.delivery_id': row.id,
        'herald.webhook.endpoint_id': row.endpoint_id,
        'herald.webhook.attempt': Number(row.attempts),
      },
      () => deliver(row),
      SpanKind.CONSUMER,
    ).finally(() => {
      const n = (inflight.get(row.endpoint_id) ?? 1) - 1;
      if (n <= 0) inflight.delete(row.endpoint_id);
      else inflight.set(row.endpoint_id, n);
      total--;
      sends.delete(p);
      if (loop.stopped) return;
      pump(row.endpoint_id);
      // Running low: claim more now rather than at the next poll.
      if ((buffers.get(row.endpoint_id)?.length ?? 0) <= options.perEndpoint) loop.kick();
    });
    sends.add(p);
  };

  const loop = createQueueLoop({
    name: 'webhook worker',
    pollMs: options.pollMs,
    logger,
    round: async () => {
      const capacity = options.total * PREFETCH;
      while (!loop.stopped) {
        const free = capacity - total - buffered;
        if (free <= 0) return;
        const claimedIn = generation;
        const rows = await claim(free);
        // An endpoint changed while this claim ran: its rows may carry the old URL or enabled flag.
        if (claimedIn !== generation) {
          await releaseRows(rows);
          continue;
        }
        for (const row of rows) {
          const buffer = buffers.get(row.endpoint_id) ?? [];
          buffer.push(row);
          buffers.set(row.endpoint_id, buffer);
          buffered++;
        }
        for (const endpointId of new Set(rows.map((r) => r.endpoint_id))) pump(endpointId);
        if (rows.length < free) return;
      }
    },
  });

  /** Hands buffered rows back at once (their attempt never started) instead of leaving them to the lease. */
  const release = async () => {
    const rows = [...buffers.values()].flat();
    buffers.clear();
    buffered = 0;
    await releaseRows(rows);
  };
  // Only rows still under this worker's claim: one redelivered meanwhile already has a fresh attempt count.
  const releaseRows = async (rows: Claimed[]) => {
    if (rows.length === 0) return;
    const claims = rows.map((r) => ({ id: r.id, lease: r.lease }));
    await db
      .execute(sql`
        update webhook_delivery w set locked_until = null, attempts = w.attempts - 1
        from jsonb_to_recordset(${jsonb(claims)}) as x(id bigint, lease bigint)
        where w.id = x.id and w.status = 'pending' and ${stillClaimed('w', sql`x.lease`)}`)
      .catch((err: unknown) => logger.warn({ err }, 'webhook worker: buffered rows left to their lease'));
  };

  return {
    start: () => loop.start(),
    kick: () => loop.kick(),
    /**
     * An endpoint was changed or removed (on any instance): the buffered rows were claimed with its URL, secrets
     * and enabled flag of then. They go back to the queue (attempt not counted) and the next claim reads every
     * endpoint as it is now, so a row claimed before a `PATCH url` never goes to the old URL, nor one of a
     * disabled endpoint out. Sends already started finish as they are.
     */
    async reclaim() {
      generation++;
      await release();
      loop.kick();
    },
    async stats(): Promise<WebhookQueueStats> {
      const rows = rowsOf<{ status: string; n: string | number }>(
        await db.execute(sql`select status, count(*) as n from webhook_delivery group by status`),
      );
      const count = (status: string) => Number(rows.find((r) => r.status === status)?.n ?? 0);
      return {
        pending: count('pending'),
        failed: count('failed'),
        delivered: count('delivered'),
        attemptFailures,
      };
    },
    /**
     * Stops claiming and gives the sends in flight a short grace to finish and be recorded. One still running
     * after it (a slow receiver) is not waited for: its lease expires and another instance sends it again
     * (at least once), rather than holding a rolling restart for up to WEBHOOK_TIMEOUT_MS.
     */
    async stop() {
      await loop.stop();
      await release();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...sends]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, STOP_GRACE_MS);
        }),
      ]);
      clearTimeout(timer);
      await writeDelivered();
      options.send.close();
    },
  };
}

export type WebhookWorker = ReturnType<typeof createWebhookWorker>;

/** The delivery log's housekeeping: delivered and given-up deliveries are kept 7 days; pending ones always. */
export const webhookDeliveryRetentionTask = (): HousekeepingTask =>
  deleteOlderThan({
    owner: 'webhooks',
    countName: 'webhookDeliveriesDeleted',
    statement: sql`delete from webhook_delivery where status <> 'pending'
                   and created_at < now() - make_interval(days => 7) returning 1`,
  });
