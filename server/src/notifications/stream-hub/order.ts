// Owns one SSE stream's place in its user's event sequence: each stream gets every state-changing event once, in
// seq order; an event that skips ahead holds the live ones while the missing seqs are read from the log (gap
// repair). The hub (stream-hub.ts) decides which streams get an event; this module how one stream takes it.
// Design: docs/architecture.md "Ordering and convergence".
import { isDatabaseUnavailable } from '../../infra/db.js';
import type { Logger } from '../../infra/logger.js';
import type { SseConnection } from '../../realtime/index.js';
import { sseBody, sseIdLine } from '../../realtime/index.js';
import { StreamErrorCode } from '../errors.js';
import type { SseEventName } from '../events.js';
import type { NotificationRepository } from '../repository.js';

export interface HubEvent {
  name: SseEventName;
  /** Serialised once per dispatch and shared by every local stream. */
  body: string;
  /** Present on state-changing events; absent on keep-alives. */
  seq?: number;
}

export interface StreamEntry {
  conn: SseConnection;
  userId: string;
  ip: string;
  sessionId: string;
  expiresAt: number;
  /** Last seq given to this stream; also the id of the events that have no seq of their own. */
  cursor: number;
  /** Non-null while the stream reads the log (connect, gap repair): live events wait here. */
  held: HubEvent[] | null;
  /** Highest seq known to exist for this user while repairing; the repair reads until it has it. */
  target: number;
}

/** Log rows read per query (connect replay and gap repair). */
export const LOG_PAGE = 500;
/** How long a gap repair keeps retrying a log read while the database is unreachable before it ends the stream. */
const REPAIR_RETRY_MS = 10_000;

export function eventBody(name: SseEventName, data: Record<string, unknown>): string {
  return sseBody(name, { type: name, ...data });
}

export interface StreamOrderDeps {
  repo: Pick<NotificationRepository, 'eventsAfter'>;
  logger: Logger;
}

export function createStreamOrder(deps: StreamOrderDeps) {
  let repairs = 0;

  /** Writes one event under the stream's current cursor. */
  const write = (entry: StreamEntry, body: string) => entry.conn.write(sseIdLine(entry.cursor) + body);

  /** Ends the stream with an `error` event saying why (the client reconnects, resuming from the cursor). */
  const close = (entry: StreamEntry, code: string, message: string) => {
    entry.conn.end(sseIdLine(entry.cursor) + eventBody('error', { code, message }));
  };

  /**
   * The log page after the stream's cursor. While the database is unreachable (connections killed, a failover)
   * the read is retried with backoff for up to REPAIR_RETRY_MS, so a short outage leaves the stream open (the
   * events are held meanwhile) instead of ending every stream that needed a repair.
   */
  const readLog = async (entry: StreamEntry) => {
    const deadline = Date.now() + REPAIR_RETRY_MS;
    for (let wait = 100; ; wait = Math.min(wait * 2, 2_000)) {
      try {
        return await deps.repo.eventsAfter(entry.userId, entry.cursor, LOG_PAGE);
      } catch (err) {
        if (!isDatabaseUnavailable(err) || Date.now() + wait > deadline || entry.conn.closed) throw err;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  };

  /** Reads the log from the stream's cursor until it is past `target`, then applies what was held. */
  const repair = async (entry: StreamEntry): Promise<void> => {
    repairs++;
    try {
      while (!entry.conn.closed) {
        const rows = await readLog(entry);
        const first = rows[0];
        if ((first && first.seq !== entry.cursor + 1) || (!first && entry.cursor < entry.target)) {
          // Pruned from the log, or announced but not there (another database): an exact replay is
          // impossible; the reconnect is told `resync: true`.
          close(entry, StreamErrorCode.RESYNC_REQUIRED, 'Events were missed; reconnect to resynchronise');
          return;
        }
        for (const row of rows) {
          entry.cursor = row.seq;
          write(entry, eventBody(row.name, row.data));
        }
        if (rows.length < LOG_PAGE && entry.cursor >= entry.target) break;
      }
    } catch (err) {
      deps.logger.warn({ err, userId: entry.userId }, 'SSE gap repair failed; closing the stream to resume');
      close(entry, StreamErrorCode.INTERNAL_ERROR, 'Could not deliver missed events; reconnect to resume');
      return;
    }
    // Everything held is now at or below the cursor (dropped) or follows it; a new gap starts a new repair.
    releaseHeld(entry);
  };

  /** Holds live events (`pending` first) and reads the log until the stream has `target`. */
  const startRepair = (entry: StreamEntry, target: number, pending: HubEvent[]) => {
    entry.held = pending;
    entry.target = target;
    void repair(entry);
  };

  /**
   * Gives one event to one stream in seq order: held while the stream reads the log, dropped when already
   * given, a repair when it skips ahead. `memo` shares the framed bytes between streams at the same cursor.
   */
  const apply = (entry: StreamEntry, ev: HubEvent, memo?: Map<number, string>) => {
    if (entry.held) {
      entry.held.push(ev);
      if (ev.seq !== undefined && ev.seq > entry.target) entry.target = ev.seq;
      return;
    }
    if (ev.seq !== undefined) {
      if (ev.seq <= entry.cursor) return;
      if (ev.seq !== entry.cursor + 1) {
        startRepair(entry, ev.seq, [ev]);
        return;
      }
      entry.cursor = ev.seq;
    }
    let frame = memo?.get(entry.cursor);
    if (frame === undefined) {
      frame = sseIdLine(entry.cursor) + ev.body;
      memo?.set(entry.cursor, frame);
    }
    entry.conn.write(frame);
  };

  /** Ends holding: applies the held live events in seq order (anything still missing starts a repair). */
  const releaseHeld = (entry: StreamEntry) => {
    const held = (entry.held ?? []).sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
    entry.held = null;
    for (const ev of held) apply(entry, ev);
  };

  return { write, close, apply, startRepair, releaseHeld, repairs: () => repairs };
}

export type StreamOrder = ReturnType<typeof createStreamOrder>;
