// Owns the durable email queue every feature sends through (docs/architecture.md, "Email"); the claim/lease/
// backoff mechanics are shared with the webhook queue (infra/queue.ts).
import { type SQL, sql } from 'drizzle-orm';
import { type Db, jsonb, rowsOf, storableJson, textArray } from './db.js';
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
 * One rendered email for many recipients (enqueueForRecipients), stored once: each recipient's copy is `email` with
 * every `placeholder` replaced by its fill (`fillText` in the text and the header values, `fillHtml` in the html;
 * the subject is the same for all).
 */
export interface TemplateEmail extends Omit<Mail, 'to'> {
  /** A fixed token without HTML-special characters that cannot occur by accident. */
  placeholder: string;
}

export interface TemplateRecipient {
  dedupeKey: string;
  to: string;
  fillText: string;
  fillHtml: string;
}

/** The columns of a claimed row that become the email sent. */
interface RowEmail {
  id: string;
  to_address: string;
  subject: string;
  text_body: string;
  html_body: string;
  attempts: string | number;
  dedupe_key: string | null;
}

/** A claimed row as stored: a shared-body row carries its body's columns (b_*) and its fills. */
interface StoredRow extends RowEmail {
  headers: Record<string, string> | string | null;
  body_id: string | number | null;
  recipient: string | null;
  fill_text: string | null;
  fill_html: string | null;
  b_subject: string | null;
  b_text: string | null;
  b_html: string | null;
  b_headers: Record<string, string> | string | null;
  b_placeholder: string | null;
}

/** A claimed row with its body resolved: the email as it is sent. */
interface ClaimedRow extends RowEmail {
  headers: Record<string, string> | null;
  /** A shared-body row whose body is gone: it cannot be sent (a failed attempt). */
  missingBody: boolean;
}

const parseHeaders = (h: Record<string, string> | string | null): Record<string, string> | null =>
  h === null ? null : typeof h === 'string' ? (JSON.parse(h) as Record<string, string>) : h;

/** The row's own email, or its shared body with the row's fills spliced in. */
function resolveClaimedRow(row: StoredRow): ClaimedRow {
  const base = { id: row.id, to_address: row.to_address, attempts: row.attempts, dedupe_key: row.dedupe_key };
  if (row.body_id === null) {
    return {
      ...base,
      subject: row.subject,
      text_body: row.text_body,
      html_body: row.html_body,
      headers: parseHeaders(row.headers),
      missingBody: false,
    };
  }
  const { b_subject: subject, b_text: text, b_html: html, b_placeholder: ph } = row;
  if (subject === null || text === null || html === null || ph === null || !row.recipient) {
    return { ...base, subject: '', text_body: '', html_body: '', headers: null, missingBody: true };
  }
  const fillText = row.fill_text ?? '';
  const headers = parseHeaders(row.b_headers);
  return {
    ...base,
    to_address: row.recipient,
    subject,
    text_body: text.replaceAll(ph, fillText),
    html_body: html.replaceAll(ph, row.fill_html ?? ''),
    headers: headers
      ? Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.replaceAll(ph, fillText)]))
      : null,
    missingBody: false,
  };
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

  // A shared-body row comes with its body (one statement); the claim's order and plan are the due index's.
  const claim = async () =>
    rowsOf<StoredRow>(
      await db.execute(sql`
        with claimed as (
          update email_outbox set attempts = attempts + 1, locked_until = ${inMs(leaseMs)}
          where id in (${dueOutboxRows(batchSize)})
          returning id, to_address, subject, text_body, html_body, attempts, dedupe_key, headers, body_id,
                    recipient, fill_text, fill_html)
        select c.id::text as id, c.to_address, c.subject, c.text_body, c.html_body, c.attempts, c.dedupe_key,
               c.headers, c.body_id, c.recipient, c.fill_text, c.fill_html, b.subject as b_subject, b.text_body as b_text,
               b.html_body as b_html, b.headers as b_headers, b.placeholder as b_placeholder
        from claimed c left join email_body b on b.id = c.body_id`),
    ).map(resolveClaimedRow);

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
              if (row.missingBody) throw new Error('the email body of this row is gone');
              await mailer.send({
                to: row.to_address,
                subject: row.subject,
                text: row.text_body,
                html: row.html_body,
                ...(row.headers ? { headers: row.headers } : {}),
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
                          ${column((e) => (e.headers ? storableJson(e.headers) : ''))}) as x(k, t, s, tb, hb, h)
              on conflict (dedupe_key) do nothing returning id::text as id`,
        ),
      );
      if (rows.length > 0 && executor === db) kick();
      return rows.length;
    },
    /**
     * Queues one email to many recipients, each with their own fills (an unsubscribe link), in one statement: the
     * body is stored once (email_body) and each recipient's row holds only its address (`recipient`; `to_address`
     * stays empty, see the schema) and fills, spliced in when the row is claimed. A dedupe key already queued is ignored (a body no row took goes with housekeeping).
     * Returns how many were new.
     */
    async enqueueForRecipients(email: TemplateEmail, recipients: TemplateRecipient[]): Promise<number> {
      if (recipients.length === 0) return 0;
      const column = (pick: (r: TemplateRecipient) => string) => textArray(recipients.map(pick));
      const rows = rowsOf<{ id: string }>(
        await db.execute(
          sql`with body as (
                insert into email_body (subject, text_body, html_body, headers, placeholder)
                values (${email.subject}, ${email.text}, ${email.html},
                        ${email.headers ? jsonb(email.headers) : sql`null`}, ${email.placeholder})
                returning id)
              insert into email_outbox (dedupe_key, to_address, recipient, subject, text_body, html_body, body_id,
                                        fill_text, fill_html)
              select k, '', t, '', '', '', (select id from body), ft, fh
              from unnest(${column((r) => r.dedupeKey)}, ${column((r) => r.to)}, ${column((r) => r.fillText)},
                          ${column((r) => r.fillHtml)}) as x(k, t, ft, fh)
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

/**
 * The outbox's housekeeping: sent and given-up rows (the email log) are kept 7 days; a shared body goes once no
 * row refers to it, and not before it is an hour old (a body whose rows are being inserted is never taken).
 */
export const emailOutboxRetentionTask = (): HousekeepingTask => {
  const emails = deleteOlderThan({
    owner: 'email-outbox',
    countName: 'emailsDeleted',
    statement: sql`delete from email_outbox where status in ('sent', 'failed')
                   and created_at < now() - make_interval(days => 7) returning 1`,
  });
  const bodies = deleteOlderThan({
    owner: 'email-outbox',
    countName: 'emailBodiesDeleted',
    statement: sql`delete from email_body b where b.created_at < now() - make_interval(hours => 1)
                   and not exists (select 1 from email_outbox o where o.body_id = b.id) returning 1`,
  });
  return {
    owner: 'email-outbox',
    async run(tx) {
      const a = await emails.run(tx);
      const b = await bodies.run(tx);
      return { counts: { ...a.counts, ...b.counts } };
    },
  };
};
