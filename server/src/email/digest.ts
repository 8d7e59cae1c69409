// Owns email digests (CONTRACT §12): scheduling one row per user and window in a durable table (idempotent across
// instances: unique (user_id, window_start)), and the worker that, when a window is over, claims due rows with
// FOR UPDATE SKIP LOCKED plus a lease (like the outbox), lists the window's notifications still unread (their SQL
// is notifications/relations.ts's digestContent: notifications owns the table) and queues one email per row through
// the outbox, in the same transaction that marks the row done. The outbox's dedupe key (`digest:<user>@<window>`)
// makes the email exactly-once even when a lease expires under a stalled worker.
import { type SQL, sql } from 'drizzle-orm';
import { accountRelations } from '../auth/accounts.js';
import { type Db, rowsOf, textArray } from '../infra/db.js';
import type { EmailOutbox, OutboxEmail } from '../infra/email-outbox.js';
import { deleteOlderThan, type HousekeepingTask } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import { createQueueLoop, dueAndUnleased, inMs } from '../infra/queue.js';
import { type DigestItem, digestContent } from '../notifications/relations.js';
import type { EmailRecipient } from '../notifications/repository.js';
import type { DigestEntry, EmailRenderer } from './renderer.js';
import { type UnsubscribeTokens, unsubscribeUrl } from './tokens.js';

/** Notifications listed in one digest; the rest are counted ("and N more"). */
export const DIGEST_MAX_ITEMS = 50;

export interface DigestWindows {
  hourly: number;
  daily: number;
}

/**
 * Windows are aligned to the epoch (hourly on the hour, daily at 00:00 UTC with the defaults), so every instance
 * computes the same window for a notification from its creation time (the database's clock). A digest is due a
 * little after its window ends, so a notification created just before the end is scheduled before it is sent.
 */
export function digestWindow(createdAtMs: number, lengthMs: number) {
  const start = Math.floor(createdAtMs / lengthMs) * lengthMs;
  const end = start + lengthMs;
  return { start, end, due: end + Math.min(Math.ceil(lengthMs / 10), 30_000) };
}

const bigintArray = (values: number[]) => sql`${`{${values.map((v) => Math.trunc(v)).join(',')}}`}::bigint[]`;
const epochMs = (column: string) => sql.raw(`(extract(epoch from ${column}) * 1000)::bigint`);

export interface DigestScheduler {
  /** Makes sure each recipient's window has its (one) digest row. One statement for the whole batch. */
  schedule(recipients: EmailRecipient[]): Promise<void>;
}

interface DueRow {
  id: string;
  user_id: string;
  ws: string | number;
  we: string | number;
  email: string;
  locale: string | null;
  send: boolean;
  total: number;
  items: string | DigestItem[];
}

/** The digests a claim takes: due, unleased, oldest first, in the due index's (next_attempt_at, id) order. */
export const dueDigestRows = (limit: number): SQL => sql`
  select id from email_digest d
  where ${dueAndUnleased('d')}
  order by next_attempt_at, id
  limit ${limit}
  for update skip locked`;

export function createDigests(deps: {
  db: Db;
  renderer: EmailRenderer;
  tokens: UnsubscribeTokens;
  outbox: Pick<EmailOutbox, 'enqueue' | 'kick'>;
  logger: Logger;
  windows: DigestWindows;
  apiBaseUrl: string;
  pollMs: number;
  batchSize?: number;
  leaseMs?: number;
}) {
  const { db, logger } = deps;
  const batchSize = deps.batchSize ?? 200;
  const leaseMs = deps.leaseMs ?? 120_000;

  const schedule: DigestScheduler['schedule'] = async (recipients) => {
    const seen = new Set<string>();
    const users: string[] = [];
    const starts: number[] = [];
    const ends: number[] = [];
    const dues: number[] = [];
    for (const r of recipients) {
      if (r.digest === 'off') continue;
      const w = digestWindow(r.createdAtMs, deps.windows[r.digest]);
      const key = `${r.userId}@${w.start}`;
      if (seen.has(key)) continue;
      seen.add(key);
      users.push(r.userId);
      starts.push(w.start);
      ends.push(w.end);
      dues.push(w.due);
    }
    if (users.length === 0) return;
    const ts = (column: string) => sql.raw(`timestamptz 'epoch' + ${column} * interval '1 millisecond'`);
    await db.execute(sql`
      insert into email_digest (user_id, window_start, window_end, next_attempt_at)
      select x.u, ${ts('x.ws')}, ${ts('x.we')}, ${ts('x.due')}
      from unnest(${textArray(users)}, ${bigintArray(starts)}, ${bigintArray(ends)}, ${bigintArray(dues)})
        as x(u, ws, we, due)
      on conflict (user_id, window_start) do nothing`);
  };

  const claim = async () =>
    rowsOf<{ id: string }>(
      await db.execute(sql`
        update email_digest set attempts = attempts + 1, locked_until = ${inMs(leaseMs)}
        where id in (${dueDigestRows(batchSize)})
        returning id::text as id`),
    ).map((r) => r.id);

  // The window's unread notifications come from notifications/, which owns their table and the preference rules.
  const content = digestContent(
    { userId: sql`d.user_id`, windowStart: sql`d.window_start`, windowEnd: sql`d.window_end` },
    DIGEST_MAX_ITEMS,
  );
  /** The claimed rows with their recipient and the window's unread notifications (one query for the batch). */
  const load = async (ids: string[]) =>
    rowsOf<DueRow>(
      await db.execute(sql`
        select d.id::text as id, d.user_id, ${epochMs('d.window_start')} as ws, ${epochMs('d.window_end')} as we,
               u.email, u.locale,
               (u.mailable and ${content.emailEnabled}) as send,
               ${content.total} as total, ${content.items} as items
        from email_digest d
        join ${accountRelations.mail} u on u.id = d.user_id
        ${content.joins}
        where d.id = any(${bigintArray(ids.map(Number))})`),
    );

  const processOnce = async (): Promise<number> => {
    const ids = await claim();
    if (ids.length === 0) return 0;
    const rows = await load(ids);
    const emails: OutboxEmail[] = [];
    const status = new Map<string, string>(ids.map((id) => [id, 'skipped'])); // rows gone with their user
    for (const row of rows) {
      if (!row.send) continue; // banned, unverified or email turned off meanwhile
      if (Number(row.total) === 0) {
        status.set(row.id, 'empty'); // everything was read (or deleted) in time: nothing is sent
        continue;
      }
      const list = typeof row.items === 'string' ? JSON.parse(row.items) : row.items;
      const items: DigestEntry[] = (list as DigestItem[]).map((n) => ({
        type: n.type,
        title: n.title,
        content: n.content,
        createdAt: new Date(n.createdAt),
      }));
      const windowStart = Number(row.ws);
      const url = unsubscribeUrl(deps.apiBaseUrl, deps.tokens.sign({ userId: row.user_id, scope: 'all' }));
      const mail = deps.renderer.render(
        {
          template: 'digest',
          items,
          total: Number(row.total),
          windowStart: new Date(windowStart),
          windowEnd: new Date(Number(row.we)),
          unsubscribeUrl: url,
        },
        row.locale,
      );
      emails.push({
        dedupeKey: `digest:${row.user_id}@${windowStart}`,
        to: row.email,
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
        headers: mail.headers,
      });
      status.set(row.id, 'sent');
    }
    const entries = [...status.entries()];
    await db.transaction(async (tx) => {
      for (let i = 0; i < emails.length; i += 1_000)
        await deps.outbox.enqueue(emails.slice(i, i + 1_000), tx);
      await tx.execute(sql`
        update email_digest d set status = x.status, finished_at = now(), locked_until = null
        from unnest(${bigintArray(entries.map(([id]) => Number(id)))}, ${textArray(entries.map(([, s]) => s))})
          as x(id, status)
        where d.id = x.id`);
    });
    if (emails.length > 0) deps.outbox.kick();
    return ids.length;
  };

  const loop = createQueueLoop({
    name: 'email digests',
    pollMs: deps.pollMs,
    logger,
    round: async () => {
      while (!loop.stopped && (await processOnce()) === batchSize) {}
    },
  });

  return {
    schedule,
    /** Processes due digests until none is left (bench and tests; the loop does the same on its own). */
    async drain(): Promise<number> {
      let total = 0;
      for (;;) {
        const n = await processOnce();
        total += n;
        if (n === 0) return total;
      }
    },
    start: () => loop.start(),
    kick: () => loop.kick(),
    stop: () => loop.stop(),
  };
}

export type Digests = ReturnType<typeof createDigests>;

/** Finished digest windows (sent, empty or skipped) are kept 7 days; pending ones always. */
export const digestRetentionTask = (): HousekeepingTask =>
  deleteOlderThan({
    owner: 'email',
    countName: 'digestsDeleted',
    statement: sql`delete from email_digest where status <> 'pending'
                   and coalesce(finished_at, created_at) < now() - make_interval(days => 7) returning 1`,
  });
