// Owns this instance's SSE hub: user id → open streams, connect/resume, seq-ordered fan-out, gap repair and
// convergence (design: docs/architecture.md "Ordering and convergence").
import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { AuthContext } from '../auth/guard.js';
import { isDatabaseUnavailable } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import type { Presence } from '../realtime/index.js';
import { openSse, type SseConnection, sseBody, sseIdLine } from '../realtime/index.js';
import { StreamErrorCode } from './errors.js';
import type { BatchMessage, NotificationBusMessage, SseEventName } from './events.js';
import type { NotificationRepository } from './repository.js';
import type { Notification } from './schemas.js';

interface HubEvent {
  name: SseEventName;
  /** Serialised once per dispatch and shared by every local stream. */
  body: string;
  /** Present on state-changing events; absent on keep-alives. */
  seq?: number;
}

interface StreamEntry {
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

export interface StreamHubDeps {
  repo: NotificationRepository;
  presence: Presence;
  logger: Logger;
  /** False when the session was revoked, the user banned or the session expired (checked periodically). */
  isSessionLive: (userId: string, sessionId: string) => Promise<boolean>;
  keepAliveMs: number;
  maxBufferedBytes: number;
  limits: StreamLimits;
}

export interface StreamLimits {
  perUser: number;
  perIp: number;
  /** Opens allowed per user and per IP within `openWindowMs` on this instance. */
  opensPerWindow: number;
  openWindowMs: number;
}

/** Why a stream was refused before it opened; the route turns it into a 429. */
export type Refusal = {
  code: typeof StreamErrorCode.TOO_MANY_STREAMS | typeof StreamErrorCode.RATE_LIMITED;
  message: string;
  retryAfterS: number;
};

/** What the client asked to resume from (the Last-Event-ID header). */
export type ResumeRequest = { kind: 'none' } | { kind: 'cursor'; seq: number } | { kind: 'invalid' };

export function parseLastEventId(raw: string | undefined): ResumeRequest {
  if (raw === undefined || raw.trim() === '') return { kind: 'none' };
  const value = raw.trim();
  if (!/^\d{1,15}$/.test(value)) return { kind: 'invalid' };
  return { kind: 'cursor', seq: Number(value) };
}

const LOG_PAGE = 500;
/** How long a gap repair keeps retrying a log read while the database is unreachable before it ends the stream. */
const REPAIR_RETRY_MS = 10_000;
// A client further behind than this refetches instead of replaying (notification retention keeps ≤ 1,000).
export const REPLAY_MAX = 5_000;
// Users per convergence query.
const CHECK_CHUNK = 1_000;

export function eventBody(name: SseEventName, data: Record<string, unknown>): string {
  return sseBody(name, { type: name, ...data });
}

/** Fixed-window counters of stream opens per key; windows are dropped as they pass. */
function createOpenCounter(limit: number, windowMs: number) {
  const windows = new Map<string, { start: number; count: number }>();
  let sweptAt = Date.now();
  return {
    /** Counts one open; returns the seconds to wait when over the limit. */
    hit(key: string, now: number): number | null {
      if (now - sweptAt > windowMs) {
        for (const [k, w] of windows) if (now - w.start >= windowMs) windows.delete(k);
        sweptAt = now;
      }
      let w = windows.get(key);
      if (!w || now - w.start >= windowMs) {
        w = { start: now, count: 0 };
        windows.set(key, w);
      }
      w.count++;
      return w.count > limit ? Math.max(1, Math.ceil((w.start + windowMs - now) / 1000)) : null;
    },
  };
}

export function createStreamHub(deps: StreamHubDeps) {
  const users = new Map<string, Set<StreamEntry>>();
  const perIp = new Map<string, number>();
  const opens = createOpenCounter(deps.limits.opensPerWindow, deps.limits.openWindowMs);
  let closing = false;
  let streamCount = 0;
  let repairs = 0;

  const write = (entry: StreamEntry, body: string) => entry.conn.write(sseIdLine(entry.cursor) + body);

  const closeEntry = (entry: StreamEntry, code: string, message: string) => {
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
          closeEntry(
            entry,
            StreamErrorCode.RESYNC_REQUIRED,
            'Events were missed; reconnect to resynchronise',
          );
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
      closeEntry(
        entry,
        StreamErrorCode.INTERNAL_ERROR,
        'Could not deliver missed events; reconnect to resume',
      );
      return;
    }
    const held = (entry.held ?? []).sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
    entry.held = null;
    // Everything held is now at or below the cursor (dropped) or follows it; a new gap starts a new repair.
    for (const ev of held) apply(entry, ev);
  };

  const startRepair = (entry: StreamEntry, target: number, pending: HubEvent[]) => {
    entry.held = pending;
    entry.target = target;
    void repair(entry);
  };

  /** Gives one event to one stream in seq order (see the header). */
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

  const deliver = (userId: string, events: HubEvent[]) => {
    const set = users.get(userId);
    if (!set) return;
    for (const ev of events) {
      // Streams of one user normally share a cursor, so they share the exact same bytes.
      const memo = new Map<number, string>();
      for (const entry of set) apply(entry, ev, memo);
    }
  };

  const deliverBatch = (msg: BatchMessage) => {
    for (const item of msg.items) {
      if (!users.has(item.userId)) continue;
      const notification: Notification = {
        id: item.id,
        userId: item.userId,
        ...msg.template,
        createdAt: item.createdAt,
        updatedAt: item.createdAt,
      };
      deliver(item.userId, [
        { name: 'new_notification', body: eventBody('new_notification', { notification }), seq: item.seq },
        {
          name: 'unread_count_changed',
          body: eventBody('unread_count_changed', { unreadCount: item.unreadCount }),
          seq: item.seq + 1,
        },
      ]);
    }
  };

  /** Brings every stream of `userId` behind `seq` up to it from the log. */
  const syncUser = (userId: string, seq: number) => {
    const set = users.get(userId);
    if (!set) return;
    for (const entry of set) {
      if (entry.held) {
        if (seq > entry.target) entry.target = seq;
      } else if (entry.cursor < seq) {
        startRepair(entry, seq, []);
      }
    }
  };

  let checking: Promise<void> | undefined;
  /**
   * Convergence: compares every local stream with the log (one query per 1,000 users) and repairs those
   * behind, so a lost bus message or a degraded period heals within one keep-alive interval; and re-checks
   * each stream's session, so a revocation whose bus message was lost still ends the stream.
   */
  const converge = async (): Promise<void> => {
    const ids = [...users.keys()];
    for (let i = 0; i < ids.length; i += CHECK_CHUNK) {
      const latest = await deps.repo.lastSeqs(ids.slice(i, i + CHECK_CHUNK));
      for (const [userId, seq] of latest) syncUser(userId, seq);
    }
    for (const set of [...users.values()]) {
      for (const entry of [...set]) {
        if (entry.conn.closed) continue;
        if (!(await deps.isSessionLive(entry.userId, entry.sessionId))) {
          closeEntry(entry, StreamErrorCode.SESSION_REVOKED, 'The session ended');
        }
      }
    }
  };
  const runConvergence = (): Promise<void> => {
    if (!checking) {
      checking = converge()
        .catch((err: unknown) => deps.logger.warn({ err }, 'SSE convergence check failed'))
        .finally(() => {
          checking = undefined;
        });
    }
    return checking;
  };

  const keepAlive = setInterval(() => {
    const now = Date.now();
    const body = eventBody('keep_alive', { timestamp: now });
    const memo = new Map<number, string>();
    for (const set of users.values()) {
      for (const entry of set) {
        if (entry.held) continue;
        // Sessions are checked at connect; one that expires while the stream is open ends it here.
        if (entry.expiresAt <= now)
          closeEntry(entry, StreamErrorCode.SESSION_EXPIRED, 'Your session has expired');
        else apply(entry, { name: 'keep_alive', body }, memo);
      }
    }
    void runConvergence();
  }, deps.keepAliveMs);
  keepAlive.unref();

  return {
    /** Applies a validated bus message to local streams. */
    onBusMessage(msg: NotificationBusMessage) {
      if (msg.kind === 'batch') {
        deliverBatch(msg);
      } else if (msg.kind === 'sync') {
        for (const u of msg.users) syncUser(u.userId, u.seq);
      } else {
        deliver(
          msg.userId,
          msg.events.map((e) => ({ name: e.name, body: eventBody(e.name, e.data), seq: e.seq })),
        );
      }
    },

    /** Runs the convergence check now (the bus just recovered: messages may have been lost meanwhile). */
    converge: runConvergence,

    /** Closes this user's streams (ban, sign-out; one session only when sessionId is given). */
    disconnectUser(userId: string, reason: string, sessionId?: string) {
      const set = users.get(userId);
      if (!set) return;
      for (const entry of [...set]) {
        if (sessionId && entry.sessionId !== sessionId) continue;
        closeEntry(entry, StreamErrorCode.SESSION_REVOKED, `The session ended (${reason})`);
      }
    },

    /** Shutdown: tells every client why, then ends the streams (EventSource reconnects elsewhere). */
    closeAll(code: string, message: string) {
      closing = true;
      clearInterval(keepAlive);
      for (const set of users.values()) for (const entry of [...set]) closeEntry(entry, code, message);
    },

    stats: () => ({ streams: streamCount, users: users.size, repairs }),

    /**
     * Checks the caps before anything is opened: streams per user and per IP (refused, not "close the
     * oldest", so one tab cannot silently kill another's stream), and the rate of opens.
     */
    admit(userId: string, ip: string): Refusal | null {
      const now = Date.now();
      const wait = Math.max(opens.hit(`u:${userId}`, now) ?? 0, opens.hit(`i:${ip}`, now) ?? 0);
      if (wait > 0) {
        return {
          code: StreamErrorCode.RATE_LIMITED,
          message: 'Too many stream connections opened; retry later',
          retryAfterS: wait,
        };
      }
      if (
        (users.get(userId)?.size ?? 0) >= deps.limits.perUser ||
        (perIp.get(ip) ?? 0) >= deps.limits.perIp
      ) {
        return {
          code: StreamErrorCode.TOO_MANY_STREAMS,
          message: 'Too many open notification streams; close one (one per browser is enough)',
          retryAfterS: 5,
        };
      }
      return null;
    },

    /** Takes over the reply and runs the connect (and resume) sequence. */
    async open(reply: FastifyReply, auth: AuthContext, resume: ResumeRequest, ip: string): Promise<void> {
      reply.hijack();
      const headers = reply.getHeaders() as OutgoingHttpHeaders;
      // Fastify keeps the reply until the stream ends: its copy of the headers is not needed after the head.
      for (const name of Object.keys(headers)) reply.removeHeader(name);
      const conn = openSse(reply.raw, { headers, maxBufferedBytes: deps.maxBufferedBytes });
      const userId = auth.user.id;
      // The cursor is read *before* registering: anything committed after the read is then held (published
      // after registration) or replayed below, or both (the seq check drops the second copy).
      let cursor: Awaited<ReturnType<NotificationRepository['cursor']>>;
      try {
        cursor = await deps.repo.cursor(userId);
      } catch (err) {
        const unavailable = isDatabaseUnavailable(err);
        // A lost database connection is expected during a failover: a warn line, and a code that says "retry".
        if (unavailable)
          deps.logger.warn({ err: (err as Error).message, userId }, 'SSE connect: database unavailable');
        else deps.logger.error({ err, userId }, 'SSE connect sequence failed');
        // An empty id resets the browser's Last-Event-ID: the retry is a fresh connect, not a full replay.
        conn.end(
          sseIdLine('') +
            eventBody('error', {
              code: unavailable ? StreamErrorCode.UNAVAILABLE : StreamErrorCode.INTERNAL_ERROR,
              message: unavailable
                ? 'The database is unavailable; reconnect shortly'
                : 'Could not start the stream',
            }),
        );
        return;
      }
      let start = cursor.lastSeq;
      let resumed = false;
      let resync = false;
      if (resume.kind === 'invalid') {
        resync = true;
      } else if (resume.kind === 'cursor') {
        const from = resume.seq;
        const inLog = from === cursor.lastSeq || (cursor.oldestSeq !== null && cursor.oldestSeq <= from + 1);
        // Ahead of the server (a cursor from another database, or made up), pruned, or too far behind.
        if (from > cursor.lastSeq || !inLog || cursor.lastSeq - from > REPLAY_MAX) resync = true;
        else {
          start = from;
          resumed = true;
        }
      }
      const entry: StreamEntry = {
        conn,
        userId,
        ip,
        sessionId: auth.session.id,
        expiresAt: auth.session.expiresAt.getTime(),
        cursor: start,
        held: [],
        target: cursor.lastSeq,
      };
      let set = users.get(userId);
      if (!set) {
        set = new Set();
        users.set(userId, set);
      }
      set.add(entry);
      streamCount++;
      perIp.set(ip, (perIp.get(ip) ?? 0) + 1);
      const release = deps.presence.userConnected(userId);
      conn.onClose(() => {
        streamCount--;
        const left = (perIp.get(ip) ?? 1) - 1;
        if (left > 0) perIp.set(ip, left);
        else perIp.delete(ip);
        release();
        const s = users.get(userId);
        s?.delete(entry);
        if (s && s.size === 0) users.delete(userId);
      });
      if (closing) {
        closeEntry(entry, StreamErrorCode.SHUTTING_DOWN, 'The server is restarting; reconnect shortly');
        return;
      }
      try {
        // The replay is read before `connected` so that event can say how many follow.
        const replay: Array<{ seq: number; body: string }> = [];
        let after = start;
        while (resumed && after < cursor.lastSeq) {
          const rows = await deps.repo.eventsAfter(userId, after, LOG_PAGE);
          if (rows.length === 0) break;
          for (const row of rows) {
            if (row.seq > cursor.lastSeq) break;
            replay.push({ seq: row.seq, body: eventBody(row.name, row.data) });
            after = row.seq;
          }
          if (rows.length < LOG_PAGE) break;
        }
        if (conn.closed) return;
        const replayed = replay.length;
        write(
          entry,
          eventBody('connected', {
            userId,
            // The count as of the cursor read; replayed and held events carry every change after it.
            unreadCount: cursor.unread,
            timestamp: Date.now(),
            resumed,
            replayed,
            resync,
          }),
        );
        for (const r of replay) {
          entry.cursor = r.seq;
          write(entry, r.body);
        }
      } catch (err) {
        deps.logger.error({ err, userId }, 'SSE connect sequence failed');
        closeEntry(entry, StreamErrorCode.INTERNAL_ERROR, 'Could not start the stream');
        return;
      }
      // Live events that arrived meanwhile, in seq order; anything still missing triggers a repair.
      const held = (entry.held ?? []).sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
      entry.held = null;
      for (const ev of held) apply(entry, ev);
      // A sync or convergence check during the connect may have announced seqs no held event carried.
      if (entry.held === null && entry.cursor < entry.target) startRepair(entry, entry.target, []);
    },
  };
}

export type StreamHub = ReturnType<typeof createStreamHub>;
