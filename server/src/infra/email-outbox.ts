// Owns the durable email queue every feature sends through (docs/architecture.md, "Email").
import { sql } from 'drizzle-orm';
import { type Db, rowsOf } from './db.js';
import type { Logger } from './logger.js';
import type { Mail, Mailer } from './mailer.js';

export interface OutboxEmail extends Mail {
  dedupeKey: string;
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
}

const MAX_BACKOFF_MS = 60 * 60 * 1000;

/**
 * Exponential backoff with full jitter: a uniform delay in [0, min(cap, base · 2^(attempts−1))). After an SMTP
 * outage every queued row would otherwise come due at the same instant on every instance and hit the server at once.
 */
export function backoffMs(attempts: number, baseMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(baseMs * 2 ** Math.max(0, attempts - 1), MAX_BACKOFF_MS);
  return Math.floor(random() * ceiling);
}

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

export function createEmailOutbox(options: EmailOutboxOptions) {
  const { db, mailer, logger } = options;
  const batchSize = options.batchSize ?? 20;
  const leaseMs = options.leaseMs ?? 120_000;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = true;
  let attemptFailures = 0;

  const claim = async () =>
    rowsOf<{
      id: string;
      to_address: string;
      subject: string;
      text_body: string;
      html_body: string;
      attempts: string | number;
    }>(
      await db.execute(sql`
        update email_outbox set attempts = attempts + 1,
          locked_until = now() + ${`${leaseMs} milliseconds`}::interval
        where id in (
          select id from email_outbox
          where status = 'pending' and next_attempt_at <= now()
            and (locked_until is null or locked_until < now())
          order by next_attempt_at, id
          limit ${batchSize}
          for update skip locked)
        returning id::text as id, to_address, subject, text_body, html_body, attempts`),
    );

  const drainOnce = async (): Promise<number> => {
    const rows = await claim();
    await Promise.all(
      rows.map(async (row) => {
        const attempts = Number(row.attempts);
        try {
          await mailer.send({
            to: row.to_address,
            subject: row.subject,
            text: row.text_body,
            html: row.html_body,
          });
          await db.execute(
            sql`update email_outbox set status = 'sent', sent_at = now(), locked_until = null, last_error = null
                where id = ${row.id}::bigint`,
          );
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          attemptFailures++;
          const giveUp = attempts >= options.maxAttempts;
          const delay = backoffMs(attempts, options.retryBaseMs);
          logger.warn({ emailId: row.id, attempts, giveUp, err: message }, 'email send failed');
          await db.execute(
            sql`update email_outbox set status = ${giveUp ? 'failed' : 'pending'}, locked_until = null,
                  last_error = ${message.slice(0, 500)},
                  next_attempt_at = now() + ${`${delay} milliseconds`}::interval
                where id = ${row.id}::bigint`,
          );
        }
      }),
    );
    return rows.length;
  };

  const drain = async () => {
    do {
      again = false;
      try {
        // Keep going while full batches come back.
        while (!stopped && (await drainOnce()) === batchSize) {}
      } catch (err) {
        logger.warn({ err }, 'email outbox drain failed');
      }
    } while (again && !stopped);
  };

  const kick = () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain().finally(() => {
      running = undefined;
    });
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      kick();
      schedule();
    }, options.pollMs);
    timer.unref();
  };

  return {
    /** Queues emails; a dedupe key already queued is ignored. Returns how many were new. */
    async enqueue(emails: OutboxEmail[]): Promise<number> {
      if (emails.length === 0) return 0;
      const values = sql.join(
        emails.map((e) => sql`(${e.dedupeKey}, ${e.to}, ${e.subject}, ${e.text}, ${e.html})`),
        sql`, `,
      );
      const rows = rowsOf<{ id: string }>(
        await db.execute(
          sql`insert into email_outbox (dedupe_key, to_address, subject, text_body, html_body) values ${values}
              on conflict (dedupe_key) do nothing returning id::text as id`,
        ),
      );
      if (rows.length > 0) kick();
      return rows.length;
    },
    start() {
      if (!stopped) return;
      stopped = false;
      kick();
      schedule();
    },
    kick,
    async stats(): Promise<OutboxStats> {
      const rows = rowsOf<{ status: string; n: string | number }>(
        await db.execute(sql`select status, count(*) as n from email_outbox group by status`),
      );
      const count = (status: string) => Number(rows.find((r) => r.status === status)?.n ?? 0);
      return { pending: count('pending'), failed: count('failed'), sent: count('sent'), attemptFailures };
    },
    /** Stops polling and waits for the round in progress. */
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

export type EmailOutbox = ReturnType<typeof createEmailOutbox>;
