// What the chat service keeps per socket and how it refuses: the abuse window (too many error or throttled
// replies close the socket with 4029, once), the frame budget every frame spends before it is parsed, the
// ordered request chain of a socket's writes, and the error replies themselves.
import { isDatabaseUnavailable } from '../../infra/db.js';
import type { Logger } from '../../infra/logger.js';
import type { ChatConnection, ChatHub } from '../hub.js';
import { ChatErrorCode, ChatLimits, CloseCode, encode } from '../protocol.js';

/** What the service keeps per socket: the abuse and frame windows and the ordered request chain. */
interface SocketState {
  errorCount: number;
  errorWindowStart: number;
  /** Inbound frames (any type) in the current frame window; see ChatLimits.FRAME_WINDOW_MS. */
  frameCount: number;
  frameWindowStart: number;
  /** Requests waiting for the database or store, processed one after another (per-socket ordering). */
  pending: number;
  chain: Promise<void>;
  /**
   * Closed as abusive (4029). Frames the peer had already sent keep arriving after the close (5,000 in one write
   * arrive as 5,000 'message' events): they are dropped without a word, so the close costs one log line.
   */
  abusive: boolean;
}

export interface SocketGuardDeps {
  hub: ChatHub;
  logger: Logger;
  /** Inbound frames of any type one socket may send per ChatLimits.FRAME_WINDOW_MS. */
  frameLimit: number;
}

export interface SocketGuard {
  /** Starts the socket's state (abuse and frame windows count from here). */
  open(conn: ChatConnection): void;
  /** Resolves once the socket's queued requests have run. */
  idle(conn: ChatConnection): Promise<void>;
  /** Closed as abusive: what the peer still sends is not read. */
  abusive(conn: ChatConnection): boolean;
  /** Counts an error or throttled reply; true when the socket is (now) closed as abusive and gets no reply. */
  countAbuse(conn: ChatConnection): boolean;
  /** Sends an `error` and counts it towards the abuse limit. */
  fail(conn: ChatConnection, code: ChatErrorCode, message: string): void;
  roomNotFound(conn: ChatConnection, roomId: string): void;
  /** The error for an edit or delete the repository refused (not the caller's message, or no such message). */
  refuseMutation(conn: ChatConnection, reason: 'not_found' | 'forbidden', verb: 'edit' | 'delete'): void;
  /** A request failed on our side: "retry" when the database is unavailable, an internal error otherwise. */
  internal(conn: ChatConnection, err: unknown, what: string): void;
  /** Spends one frame of the socket's budget; true (after telling the client) when it is spent. */
  overFrameBudget(conn: ChatConnection): boolean;
  /** Queues a request behind the socket's earlier ones (at most ChatLimits.MAX_PENDING_REQUESTS waiting). */
  enqueue(conn: ChatConnection, run: () => Promise<void>): void;
}

export function createSocketGuard(deps: SocketGuardDeps): SocketGuard {
  const { hub, logger } = deps;
  // Owned here alone; entries go with their sockets (weak keys).
  const sockets = new WeakMap<ChatConnection, SocketState>();
  const newState = (): SocketState => {
    const now = Date.now();
    return {
      errorCount: 0,
      errorWindowStart: now,
      frameCount: 0,
      frameWindowStart: now,
      pending: 0,
      chain: Promise.resolve(),
      abusive: false,
    };
  };
  const stateOf = (conn: ChatConnection): SocketState => {
    let st = sockets.get(conn);
    if (!st) {
      st = newState();
      sockets.set(conn, st);
    }
    return st;
  };

  const countAbuse = (conn: ChatConnection) => {
    const now = Date.now();
    const st = stateOf(conn);
    if (now - st.errorWindowStart > ChatLimits.ABUSE_WINDOW_MS) {
      st.errorWindowStart = now;
      st.errorCount = 0;
    }
    st.errorCount++;
    if (st.errorCount > ChatLimits.ABUSE_MAX_ERRORS) {
      if (st.abusive) return true;
      st.abusive = true;
      logger.warn({ connectionId: conn.id, ip: conn.ip }, 'chat: closing abusive socket');
      hub.close(conn, CloseCode.ABUSE, 'too many invalid frames');
      return true;
    }
    return false;
  };

  const fail = (conn: ChatConnection, code: ChatErrorCode, message: string) => {
    if (countAbuse(conn)) return;
    hub.send(conn, encode({ type: 'error', code, message }));
  };

  return {
    open(conn) {
      sockets.set(conn, newState());
    },
    idle: (conn) => stateOf(conn).chain,
    abusive: (conn) => stateOf(conn).abusive,
    countAbuse,
    fail,

    roomNotFound(conn, roomId) {
      if (countAbuse(conn)) return;
      hub.send(
        conn,
        encode({ type: 'error', code: ChatErrorCode.NOT_FOUND, message: 'Room not found', roomId }),
      );
    },

    refuseMutation: (conn, reason, verb) =>
      reason === 'forbidden'
        ? fail(conn, ChatErrorCode.FORBIDDEN, `Only the author or an administrator can ${verb} this message`)
        : fail(conn, ChatErrorCode.MESSAGE_NOT_FOUND, 'Message not found'),

    internal(conn, err, what) {
      if (isDatabaseUnavailable(err)) {
        // Expected during a failover or killed connections: one warn line, and a code that says "retry" (a
        // repeated clientMessageId is not stored twice). The socket stays open.
        logger.warn(
          { err: (err as Error).message, connectionId: conn.id },
          `chat: ${what}: database unavailable`,
        );
        hub.send(
          conn,
          encode({
            type: 'error',
            code: ChatErrorCode.UNAVAILABLE,
            message: `Could not ${what}; retry shortly`,
          }),
        );
        return;
      }
      logger.error({ err, connectionId: conn.id }, `chat: ${what} failed`);
      hub.send(
        conn,
        encode({ type: 'error', code: ChatErrorCode.INTERNAL_ERROR, message: `Could not ${what}` }),
      );
    },

    /**
     * The per-socket frame budget, spent by every frame before it is even parsed: pings, typing and invalid
     * frames are answered or dropped cheaply, but each still costs a parse and often a reply, so none is free.
     * Beyond it the socket is told `throttled`, and those replies count towards the abuse close (4029).
     */
    overFrameBudget(conn) {
      const now = Date.now();
      const st = stateOf(conn);
      if (now - st.frameWindowStart >= ChatLimits.FRAME_WINDOW_MS) {
        st.frameWindowStart = now;
        st.frameCount = 0;
      }
      st.frameCount++;
      if (st.frameCount <= deps.frameLimit) return false;
      if (!countAbuse(conn)) {
        hub.send(
          conn,
          encode({
            type: 'throttled',
            retryAfterMs: Math.max(1, st.frameWindowStart + ChatLimits.FRAME_WINDOW_MS - now),
            limit: deps.frameLimit,
            windowMs: ChatLimits.FRAME_WINDOW_MS,
          }),
        );
      }
      return true;
    },

    enqueue(conn, run) {
      const st = stateOf(conn);
      if (st.pending >= ChatLimits.MAX_PENDING_REQUESTS) {
        fail(conn, ChatErrorCode.TOO_MANY_REQUESTS, 'Too many requests in flight');
        return;
      }
      st.pending++;
      st.chain = st.chain
        .then(run)
        .catch((err: unknown) => logger.error({ err, connectionId: conn.id }, 'chat: request failed'))
        .finally(() => {
          st.pending--;
        });
    },
  };
}
