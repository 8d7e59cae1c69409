// Owns the durable email queue every feature sends through (docs/architecture.md, "Email"); the claim/lease/
// backoff mechanics are shared with the webhook queue (infra/queue.ts).
import { type SQL, sql } from 'drizzle-orm';
import { type Db, rowsOf, textArray } from './db.js';
import { deleteOlderThan, type HousekeepingTask } from './housekeeping.js';
import type { Logger } from './logger.js';
import type { Mail, Mailer } from './mailer.js';
import { createQueueLoop, dueAndUnleased, inMs, backoffMs as jitteredBackoff } from './queue.js';
import { SpanKind, withSpan } from './tracing.js';

/** What an email's final outcome reports to listeners (the email.sent / email.failed webhook events). */
export interface EmailOutcome {
  id: string;
  to: string;
  subject: string;
  /** The kind of email, from its dedupe key: `notification`, `auth:verify`, `auth:reset`, `auth:magic-link`. */
  kind: string;
  attempts: number;
  status: 'sent' | 'failed';
  error: string | null;
}

type Executor = Pick<Db, 'execute'>;

export interface OutboxEmail extends Mail {
  dedupeKey: string;
}

/**
 * One rendered email for many recipients (enqueueForRecipients): each recipient's copy is `email` with every
 * `placeholder` replaced by its fill (`fillText` in the text and the header values, `fillHtml` in the html).
 */
export interface TemplateEmail extends Omit<Mail, 'to'> {
  /** A fixed token without HTML-, JSON- or array-special characters that cannot occur by accident. */
  placeholder: string;
}

export interface TemplateRecipient {
  dedupeKey: string;
  to: string;
  fillText: string;
  fillHtml: string;
}

export interface EmailOutboxOptions {
  db: Db;
  mailer: Mailer;
  logger: Logger;
  pollMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  /** Rows claimed per round. */
  batchSize?: number;
  /** How long a claimed row stays invisible to other workers. */
  leaseMs?: number;
  /**
   * Called inside the transaction that records an email's final outcome (sent, or given up), so what it writes
   * (the webhook queue rows) commits with the outcome or not at all.
   */
  onOutcome?: (tx: Executor, outcome: EmailOutcome) => Promise<void>;
}

const MAX_BACKOFF_MS = 60 * 60 * 1000;

/**
 * Exponential backoff with full jitter: a uniform delay in [0, min(cap, base · 2^(attempts−1))). After an SMTP
 * outage every queued row would otherwise come due at the same instant on every instance and hit the server at once.
 */
export function backoffMs(attempts: number, baseMs: number, random: () => number = Math.random): number {
  return jitteredBackoff(attempts, baseMs, MAX_BACKOFF_MS, random);
}

/** `notification:<id>` → `notification`, `auth:verify:<hash>` → `auth:verify`. */
const kindOf = (dedupeKey: string | null) =>
  dedupeKey === null ? 'other' : dedupeKey.split(':').slice(0, -1).join(':') || 'other';

export interface OutboxStats {
  /** Rows waiting to be sent (queue depth), cluster-wide. */
  pending: number;
  /** Rows given up after EMAIL_MAX_ATTEMPTS, cluster-wide (kept 7 days by retention). */
  failed: number;
  /** Rows sent, cluster-wide (kept 7 days by retention). */
  sent: number;
  /** Failed send attempts on this instance since it started (each retry counts). */
  attemptFailures: number;
}

/**
 * The rows a claim takes: due, unleased, oldest first. Its order is the due index's (next_attempt_at, id), so a
 * claim reads `limit` entries off the index whatever the backlog (test/email/claim-plan.test.ts checks the plan).
 */
export const dueOutboxRows = (limit: number): SQL => sql`
  select id from email_outbox o
  where ${dueAndUnleased('o')}
  order by next_attempt_at, id
  limit ${limit}
  for update skip locked`;

export function createEmailOutbox(options: EmailOutboxOptions) {
  const { db, mailer, logger } = options;
  const batchSize = options.batchSize ?? 20;
  const leaseMs = options.leaseMs ?? 120_000;
  let attemptFailures = 0;

  const claim = async () =>
    rowsOf<{
      id: string;
      to_address: string;
      subject: string;
      text_body: string;
      html_body: string;
      attempts: string | number;
      dedupe_key: string | null;
      headers: Record<string, string> | string | null;
    }>(
      await db.execute(sql`
        update email_outbox set attempts = attempts + 1, locked_until = ${inMs(leaseMs)}
        where id in (${dueOutboxRows(batchSize)})
        returning id::text as id, to_address, subject, text_body, html_body, attempts, dedupe_key, headers`),
    );

  /** Writes the row's new state; a final outcome is reported to onOutcome in the same transaction. */
  const settle = async (update: SQL, outcome: EmailOutcome | null) => {
    const { onOutcome } = options;
    if (!outcome || !onOutcome) {
      await db.execute(update);
      return;
    }
    await db.transaction(async (tx) => {
      await tx.execute(update);
      await onOutcome(tx, outcome);
    });
  };

  /**
   * The sent rows of a round in one statement and one transaction (with their outcomes): a commit per email
   * was the outbox's limit (docs/performance.md, "Email digests").
   */
  const settleSent = async (sent: EmailOutcome[]) => {
    if (sent.length === 0) return;
    const update = sql`update email_outbox set status = 'sent', sent_at = now(), locked_until = null, last_error = null
        where id = any(${`{${sent.map((o) => o.id).join(',')}}`}::bigint[])`;
    const { onOutcome } = options;
    if (!onOutcome) {
      await db.execute(update);
      return;
    }
    await db.transaction(async (tx) => {
      await tx.execute(update);
      for (const outcome of sent) await onOutcome(tx, outcome);
    });
  };

  const drainOnce = async (): Promise<number> => {
    const rows = await claim();
    const sent: EmailOutcome[] = [];
    await Promise.all(
      rows.map((row) =>
        // One span per email (a queue consumer): the send and the settling queries are its children.
        withSpan(
          'email-outbox.send',
          { 'herald.email.id': String(row.id), 'herald.email.attempt': Number(row.attempts) },
          async () => {
            const attempts = Number(row.attempts);
            try {
              await mailer.send({
                to: row.to_address,
                subject: row.subject,
                text: row.text_body,
                html: row.html_body,
                ...(row.headers
                  ? { headers: typeof row.headers === 'string' ? JSON.parse(row.headers) : row.headers }
                  : {}),
              });
              // Settled with the round's other sent rows in one statement (settleSent below).
              sent.push({
                id: row.id,
                to: row.to_address,
                subject: row.subject,
                kind: kindOf(row.dedupe_key),
                attempts,
                status: 'sent',
                error: null,
              });
            } catch (err) {
              const message = err instanceof Error ? err.message : String(err);
              attemptFailures++;
              const giveUp = attempts >= options.maxAttempts;
              const delay = backoffMs(attempts, options.retryBaseMs);
              logger.warn({ emailId: row.id, attempts, giveUp, err: message }, 'email send failed');
              await settle(
                sql`update email_outbox set status = ${giveUp ? 'failed' : 'pending'}, locked_until = null,
                  last_error = ${message.slice(0, 500)}, next_attempt_at = ${inMs(delay)}
                where id = ${row.id}::bigint`,
                giveUp
                  ? {
                      id: row.id,
                      to: row.to_address,
                      subject: row.subject,
                      kind: kindOf(row.dedupe_key),
                      attempts,
                      status: 'failed',
                      error: message.slice(0, 500),
                    }
                  : null,
              );
            }
          },
          SpanKind.CONSUMER,
        ),
      ),
    );
    // The round's sent rows settle in one statement, under a span of their own (its query is the child).
    if (sent.length > 0) {
      await withSpan('email-outbox.settle', { 'herald.email.sent': sent.length }, () => settleSent(sent));
    }
    return rows.length;
  };

  const loop = createQueueLoop({
    name: 'email outbox',
    pollMs: options.pollMs,
    logger,
    // Keep going while full batches come back.
    round: async () => {
      while (!loop.stopped && (await drainOnce()) === batchSize) {}
    },
  });
  const kick = () => loop.kick();

  return {
    /**
     * Queues emails; a dedupe key already queued is ignored. Returns how many were new. `executor` lets a caller
     * queue inside its own transaction (a digest is queued and marked done together); the caller then kicks.
     */
    async enqueue(emails: OutboxEmail[], executor: Executor = db): Promise<number> {
      if (emails.length === 0) return 0;
      // Parallel arrays through unnest: six parameters whatever the batch size (a digest run queues thousands
      // of multi-kilobyte bodies; one bind parameter per value made building and parsing the statement the cost).
      const column = (pick: (e: OutboxEmail) => string) => textArray(emails.map(pick));
      const rows = rowsOf<{ id: string }>(
        await executor.execute(
          sql`insert into email_outbox (dedupe_key, to_address, subject, text_body, html_body, headers)
              select k, t, s, tb, hb, nullif(h, '')::jsonb
              from unnest(${column((e) => e.dedupeKey)}, ${column((e) => e.to)}, ${column((e) => e.subject)},
                          ${column((e) => e.text)}, ${column((e) => e.html)},
                          ${column((e) => (e.headers ? JSON.stringify(e.headers) : ''))}) as x(k, t, s, tb, hb, h)
              on conflict (dedupe_key) do nothing returning id::text as id`,
        ),
      );
      if (rows.length > 0 && executor === db) kick();
      return rows.length;
    },
    /**
     * Queues one email to many recipients, each with their own fills (an unsubscribe link), in one statement. The
     * body travels once and PostgreSQL splices each row's fills in: building the array literal of 500 rendered
     * 4-kilobyte bodies cost Node more than the rest of a broadcast batch's email work (issue 27). The rows stored
     * are the ones `enqueue` would store for the same emails.
     */
    async enqueueForRecipients(email: TemplateEmail, recipients: TemplateRecipient[]): Promise<number> {
      if (recipients.length === 0) return 0;
      const column = (pick: (r: TemplateRecipient) => string) => textArray(recipients.map(pick));
      const ph = email.placeholder;
      // Header values are spliced inside their JSON text: the fill is JSON-escaped the way JSON.stringify would.
      const headers = email.headers ? JSON.stringify(email.headers) : null;
      const rows = rowsOf<{ id: string }>(
        await db.execute(
          sql`insert into email_outbox (dedupe_key, to_address, subject, text_body, html_body, headers)
              select k, t, ${email.subject}, replace(${email.text}::text, ${ph}::text, ft),
                     replace(${email.html}::text, ${ph}::text, fh), replace(${headers}::text, ${ph}::text, fj)::jsonb
              from unnest(${column((r) => r.dedupeKey)}, ${column((r) => r.to)}, ${column((r) => r.fillText)},
                          ${column((r) => r.fillHtml)}, ${column((r) => JSON.stringify(r.fillText).slice(1, -1))})
                as x(k, t, ft, fh, fj)
              on conflict (dedupe_key) do nothing returning id::text as id`,
        ),
      );
      if (rows.length > 0) kick();
      return rows.length;
    },
    start: () => loop.start(),
    kick,
    async stats(): Promise<OutboxStats> {
      const rows = rowsOf<{ status: string; n: string | number }>(
        await db.execute(sql`select status, count(*) as n from email_outbox group by status`),
      );
      const count = (status: string) => Number(rows.find((r) => r.status === status)?.n ?? 0);
      return { pending: count('pending'), failed: count('failed'), sent: count('sent'), attemptFailures };
    },
    /** Stops polling and waits for the round in progress. */
    stop: () => loop.stop(),
  };
}

export type EmailOutbox = ReturnType<typeof createEmailOutbox>;

/** The outbox's housekeeping: sent and given-up rows (the email log) are kept 7 days. */
export const emailOutboxRetentionTask = (): HousekeepingTask =>
  deleteOlderThan({
    owner: 'email-outbox',
    countName: 'emailsDeleted',
    statement: sql`delete from email_outbox where status in ('sent', 'failed')
                   and created_at < now() - make_interval(days => 7) returning 1`,
  });
