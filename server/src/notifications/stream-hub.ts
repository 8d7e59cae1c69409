// Owns this instance's SSE hub: the open streams of each user, the connect (and resume) sequence, fan-out of
// bus messages in seq order, and convergence with the log (design: docs/architecture.md "Ordering and
// convergence"). How one stream takes an event and repairs a gap is stream-hub/order.ts; where a stream starts
// is stream-hub/resume.ts; the caps and the per-user/per-address bookkeeping are stream-hub/registry.ts.
import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { AuthContext } from '../auth/guard.js';
import { isDatabaseUnavailable } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import type { Presence } from '../realtime/index.js';
import { openSse, type SseConnection, sseIdLine } from '../realtime/index.js';
import { StreamErrorCode } from './errors.js';
import type { BatchMessage, NotificationBusMessage } from './events.js';
import type { NotificationRepository } from './repository.js';
import { createStreamOrder, eventBody, type HubEvent, type StreamEntry } from './stream-hub/order.js';
import { createStreamRegistry, type Refusal, type StreamLimits } from './stream-hub/registry.js';
import { planResume, type ResumeRequest, readReplay } from './stream-hub/resume.js';

export interface StreamHubDeps {
  repo: NotificationRepository;
  presence: Presence;
  logger: Logger;
  /** False when the session was revoked, the user banned or the session expired (checked periodically). */
  isSessionLive: (userId: string, sessionId: string) => Promise<boolean>;
  /** The same for many sessions in one store round trip and one query (convergence); one by one without it. */
  sessionsLive?: (sessions: ReadonlyArray<{ userId: string; sessionId: string }>) => Promise<boolean[]>;
  keepAliveMs: number;
  maxBufferedBytes: number;
  limits: StreamLimits;
}

// Users per convergence query.
const CHECK_CHUNK = 1_000;

/**
 * The new_notification bodies of one batch: exactly `eventBody('new_notification', { notification })`, with the
 * template (type, title, content, metadata, read: the same for every user) serialised once per batch instead of
 * once per user. JSON.stringify escapes line breaks, so the data stays one `data:` line as sseBody writes it.
 */
export function newNotificationBodies(
  template: BatchMessage['template'],
): (item: Pick<BatchMessage['items'][number], 'id' | 'userId' | 'createdAt'>) => string {
  const shared = JSON.stringify(template).slice(1, -1);
  const head = 'event: new_notification\ndata: {"type":"new_notification","notification":{"id":';
  return (item) => {
    const at = JSON.stringify(item.createdAt);
    return `${head}${JSON.stringify(item.id)},"userId":${JSON.stringify(item.userId)}${shared ? `,${shared}` : ''},"createdAt":${at},"updatedAt":${at}}}\n\n`;
  };
}

export function createStreamHub(deps: StreamHubDeps) {
  const streams = createStreamRegistry(deps.limits, deps.presence);
  const order = createStreamOrder(deps);
  const { apply, startRepair } = order;
  let closing = false;

  const deliver = (userId: string, events: HubEvent[]) => {
    const set = streams.of(userId);
    if (!set) return;
    // Streams of one user normally share a cursor, so they share the exact same bytes. (A user's two events of a
    // broadcast already leave in one system call: Node corks a chunked response until the next tick.)
    for (const ev of events) {
      const memo = new Map<number, string>();
      for (const entry of set) apply(entry, ev, memo);
    }
  };

  const deliverBatch = (msg: BatchMessage) => {
    const body = newNotificationBodies(msg.template);
    for (const item of msg.items) {
      if (!streams.has(item.userId)) continue;
      deliver(item.userId, [
        { name: 'new_notification', body: body(item), seq: item.seq },
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
    const set = streams.of(userId);
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
    const ids = streams.userIds();
    for (let i = 0; i < ids.length; i += CHECK_CHUNK) {
      const latest = await deps.repo.lastSeqs(ids.slice(i, i + CHECK_CHUNK));
      for (const [userId, seq] of latest) syncUser(userId, seq);
    }
    const open = [...streams.byUser()].flatMap((set) => [...set]).filter((e) => !e.conn.closed);
    // Every open stream is re-checked each keep-alive interval: with thousands of streams, one round trip (and
    // on the first pass one query) per stream was a burst of work that competed with live deliveries.
    const check =
      deps.sessionsLive ??
      ((list) => Promise.all(list.map((e) => deps.isSessionLive(e.userId, e.sessionId))));
    for (let i = 0; i < open.length; i += CHECK_CHUNK) {
      const chunk = open.slice(i, i + CHECK_CHUNK);
      const live = await check(chunk);
      chunk.forEach((entry, k) => {
        if (live[k] === false && !entry.conn.closed) {
          order.close(entry, StreamErrorCode.SESSION_REVOKED, 'The session ended');
        }
      });
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
    for (const set of streams.byUser()) {
      for (const entry of set) {
        if (entry.held) continue;
        // Sessions are checked at connect; one that expires while the stream is open ends it here.
        if (entry.expiresAt <= now)
          order.close(entry, StreamErrorCode.SESSION_EXPIRED, 'Your session has expired');
        else apply(entry, { name: 'keep_alive', body }, memo);
      }
    }
    void runConvergence();
  }, deps.keepAliveMs);
  keepAlive.unref();

  /** Connect failed before the stream was registered: an `error` event that resets the client's cursor. */
  const refuseConnect = (conn: SseConnection, userId: string, err: unknown) => {
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
  };

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
      const set = streams.of(userId);
      if (!set) return;
      for (const entry of [...set]) {
        if (sessionId && entry.sessionId !== sessionId) continue;
        order.close(entry, StreamErrorCode.SESSION_REVOKED, `The session ended (${reason})`);
      }
    },

    /** Shutdown: tells every client why, then ends the streams (EventSource reconnects elsewhere). */
    closeAll(code: string, message: string) {
      closing = true;
      clearInterval(keepAlive);
      for (const set of streams.byUser()) for (const entry of [...set]) order.close(entry, code, message);
    },

    stats: () => ({ ...streams.stats(), repairs: order.repairs() }),

    /** Checks the caps (streams per user and per IP, rate of opens) before anything is opened. */
    admit: (userId: string, ip: string): Refusal | null => streams.admit(userId, ip),

    /** Takes over the reply and runs the connect (and resume) sequence. */
    async open(reply: FastifyReply, auth: AuthContext, resume: ResumeRequest, ip: string): Promise<void> {
      reply.hijack();
      const headers = reply.getHeaders() as OutgoingHttpHeaders;
      // Fastify keeps the reply until the stream ends: its copy of the headers is not needed after the head.
      dropReplyHeaders(reply);
      const conn = openSse(reply.raw, { headers, maxBufferedBytes: deps.maxBufferedBytes });
      // The client left while the route authenticated: nothing to register or read.
      if (conn.closed) return;
      const userId = auth.user.id;
      // The cursor is read *before* registering: anything committed after the read is then held (published
      // after registration) or replayed below, or both (the seq check drops the second copy).
      let cursor: Awaited<ReturnType<NotificationRepository['cursor']>>;
      try {
        cursor = await deps.repo.cursor(userId);
      } catch (err) {
        refuseConnect(conn, userId, err);
        return;
      }
      const { start, resumed, resync } = planResume(resume, cursor);
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
      streams.add(entry);
      if (closing) {
        order.close(entry, StreamErrorCode.SHUTTING_DOWN, 'The server is restarting; reconnect shortly');
        return;
      }
      try {
        // The replay is read before `connected` so that event can say how many follow.
        const replay = resumed ? await readReplay(deps.repo, userId, start, cursor.lastSeq) : [];
        if (conn.closed) return;
        order.write(
          entry,
          eventBody('connected', {
            userId,
            // The count as of the cursor read; replayed and held events carry every change after it.
            unreadCount: cursor.unread,
            timestamp: Date.now(),
            resumed,
            replayed: replay.length,
            resync,
          }),
        );
        for (const r of replay) {
          entry.cursor = r.seq;
          order.write(entry, r.body);
        }
      } catch (err) {
        deps.logger.error({ err, userId }, 'SSE connect sequence failed');
        order.close(entry, StreamErrorCode.INTERNAL_ERROR, 'Could not start the stream');
        return;
      }
      // Live events that arrived meanwhile, in seq order; anything still missing triggers a repair.
      order.releaseHeld(entry);
      // A sync or convergence check during the connect may have announced seqs no held event carried.
      if (entry.held === null && entry.cursor < entry.target) startRepair(entry, entry.target, []);
    },
  };
}

export type StreamHub = ReturnType<typeof createStreamHub>;

/**
 * Replaces the reply's header store with an empty one. Removing the headers one by one (`removeHeader`) leaves
 * V8 a dictionary-mode object with its capacity (~840 B per idle stream in a heap snapshot diff); Fastify keeps
 * the store under a private symbol, found by its description. Not found (another Fastify): the headers stay,
 * which costs memory only.
 */
function dropReplyHeaders(reply: FastifyReply): void {
  const target = reply as unknown as Record<symbol, unknown>;
  const store = Object.getOwnPropertySymbols(target).find((s) => s.description === 'fastify.reply.headers');
  if (store !== undefined) target[store] = {};
}
