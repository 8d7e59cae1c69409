// Owns this instance's SSE hub: user id → open streams (tabs), connect/resume sequence, fan-out of bus events,
// keep-alives, closing on session end and shutdown.
//
// Event ids are the notification `seq` cursor. A stream's cursor is the highest seq it has been given (or, on a
// fresh connect, the user's newest seq when the stream opened); every event carries the stream's cursor so the
// browser's Last-Event-ID always means "everything up to here was seen". Connect replays seq > cursor from
// PostgreSQL (a resume's missed events; usually nothing on a fresh connect); events arriving during the replay
// are held and then applied, skipping seqs already replayed.
import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { AuthContext } from '../auth/guard.js';
import type { Logger } from '../infra/logger.js';
import { openSse, type SseConnection, sseBody, sseIdLine } from '../realtime/sse.js';
import type { Presence } from '../realtime/types.js';
import type { BatchMessage, NotificationBusMessage, SseEventName } from './events.js';
import { type NotificationRepository, publicNotification } from './repository.js';
import type { Notification } from './schemas.js';

interface HubEvent {
  name: SseEventName;
  /** Serialised once per dispatch and shared by every local stream. */
  body: string;
  seq?: number;
}

interface StreamEntry {
  conn: SseConnection;
  userId: string;
  sessionId: string;
  expiresAt: number;
  cursor: number;
  /** Non-null while the connect/resume sequence runs: live events wait here. */
  held: HubEvent[] | null;
}

export interface StreamHubDeps {
  repo: NotificationRepository;
  presence: Presence;
  logger: Logger;
  unreadCount: (userId: string) => Promise<number>;
  keepAliveMs: number;
  maxBufferedBytes: number;
}

const REPLAY_PAGE = 500;
// A client that is further behind than this reloads its list instead of replaying (retention keeps ≤ 1,000).
const REPLAY_MAX = 5_000;

export function eventBody(name: SseEventName, data: Record<string, unknown>): string {
  return sseBody(name, { type: name, ...data });
}

export function createStreamHub(deps: StreamHubDeps) {
  const users = new Map<string, Set<StreamEntry>>();
  let closing = false;
  let streamCount = 0;

  const writeTo = (entry: StreamEntry, ev: HubEvent, memo?: Map<number, string>) => {
    if (ev.seq !== undefined) {
      // Already given (replay overlap or a duplicate delivery): never send the same notification twice.
      if (ev.seq <= entry.cursor) return;
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
      for (const entry of set) {
        if (entry.held) entry.held.push(ev);
        else writeTo(entry, ev, memo);
      }
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
        },
      ]);
    }
  };

  const closeEntry = (entry: StreamEntry, code: string, message: string) => {
    entry.conn.end(sseIdLine(entry.cursor) + eventBody('error', { code, message }));
  };

  const keepAlive = setInterval(() => {
    const now = Date.now();
    const body = eventBody('keep_alive', { timestamp: now });
    const memo = new Map<number, string>();
    for (const set of users.values()) {
      for (const entry of set) {
        if (entry.held) continue;
        // Sessions are checked at connect; one that expires while the stream is open ends it here.
        if (entry.expiresAt <= now) closeEntry(entry, 'SESSION_EXPIRED', 'Your session has expired');
        else writeTo(entry, { name: 'keep_alive', body }, memo);
      }
    }
  }, deps.keepAliveMs);
  keepAlive.unref();

  return {
    /** Applies a validated bus message to local streams. */
    onBusMessage(msg: NotificationBusMessage) {
      if (msg.kind === 'batch') {
        deliverBatch(msg);
        return;
      }
      deliver(
        msg.userId,
        msg.events.map((e) => ({ name: e.name, body: eventBody(e.name, e.data), seq: e.seq })),
      );
    },

    /** Closes this user's streams (ban, sign-out; one session only when sessionId is given). */
    disconnectUser(userId: string, reason: string, sessionId?: string) {
      const set = users.get(userId);
      if (!set) return;
      for (const entry of [...set]) {
        if (sessionId && entry.sessionId !== sessionId) continue;
        closeEntry(entry, 'SESSION_REVOKED', `The session ended (${reason})`);
      }
    },

    /** Shutdown: tells every client why, then ends the streams (EventSource reconnects elsewhere). */
    closeAll(code: string, message: string) {
      closing = true;
      clearInterval(keepAlive);
      for (const set of users.values()) for (const entry of [...set]) closeEntry(entry, code, message);
    },

    stats: () => ({ streams: streamCount, users: users.size }),

    /** Takes over the reply and runs the connect (and resume) sequence. */
    async open(reply: FastifyReply, auth: AuthContext, lastEventId: number | null): Promise<void> {
      reply.hijack();
      const conn = openSse(reply.raw, {
        headers: reply.getHeaders() as OutgoingHttpHeaders,
        maxBufferedBytes: deps.maxBufferedBytes,
      });
      const userId = auth.user.id;
      // Fresh connect: the cursor starts at the user's newest seq, read *before* registering. Anything created
      // after this read is then either held (published after registration) or replayed below, or both (the
      // cursor skips the duplicate). Read after registering, it could include a held event and so drop it.
      let start = lastEventId;
      if (start === null) {
        try {
          start = await deps.repo.maxSeq(userId);
        } catch (err) {
          deps.logger.error({ err, userId }, 'SSE connect sequence failed');
          // An empty id resets the browser's Last-Event-ID: the retry is a fresh connect, not a full replay.
          conn.end(
            sseIdLine('') +
              eventBody('error', { code: 'INTERNAL_ERROR', message: 'Could not start the stream' }),
          );
          return;
        }
      }
      const entry: StreamEntry = {
        conn,
        userId,
        sessionId: auth.session.id,
        expiresAt: auth.session.expiresAt.getTime(),
        // Also the id of an error event sent while the connect sequence runs (ban, shutdown).
        cursor: start,
        held: [],
      };
      // Registered before reading the database, so nothing created meanwhile can fall between the two.
      let set = users.get(userId);
      if (!set) {
        set = new Set();
        users.set(userId, set);
      }
      set.add(entry);
      streamCount++;
      const release = deps.presence.userConnected(userId);
      conn.onClose(() => {
        streamCount--;
        release();
        const s = users.get(userId);
        s?.delete(entry);
        if (s && s.size === 0) users.delete(userId);
      });
      if (closing) {
        closeEntry(entry, 'SHUTTING_DOWN', 'The server is restarting; reconnect shortly');
        return;
      }
      try {
        const unreadCount = await deps.unreadCount(userId);
        conn.write(
          sseIdLine(entry.cursor) + eventBody('connected', { userId, unreadCount, timestamp: Date.now() }),
        );
        {
          let sent = 0;
          while (!conn.closed && sent < REPLAY_MAX) {
            const rows = await deps.repo.after(userId, entry.cursor, REPLAY_PAGE);
            for (const row of rows) {
              writeTo(entry, {
                name: 'new_notification',
                body: eventBody('new_notification', { notification: publicNotification(row) }),
                seq: row.seq,
              });
            }
            sent += rows.length;
            if (rows.length < REPLAY_PAGE) break;
          }
        }
      } catch (err) {
        deps.logger.error({ err, userId }, 'SSE connect sequence failed');
        closeEntry(entry, 'INTERNAL_ERROR', 'Could not start the stream');
        return;
      }
      const held = entry.held ?? [];
      entry.held = null;
      for (const ev of held) writeTo(entry, ev);
    },
  };
}

export type StreamHub = ReturnType<typeof createStreamHub>;
