// Who may write and whether this write may go ahead: an open socket of a signed-in, verified user whose session
// has not expired (revocation re-checked before storing), valid message text, and the message throttle. Each
// refusal is answered here, so a handler only sees a go-ahead or null.
import type { ChatConnection, ChatIdentity } from '../hub.js';
import { ChatErrorCode, CloseCode, encode, normalizeMessageText } from '../protocol.js';
import type { ThrottleResult } from '../throttle.js';
import type { ServiceContext } from './context.js';

export interface WriteChecks {
  /** The identity allowed to write, or null after telling the client why not. */
  writer(conn: ChatConnection): ChatIdentity | null;
  /** Shared prelude of send and edit: a permitted writer, valid text, not throttled; otherwise answered and null. */
  writableText(conn: ChatConnection, raw: string): Promise<{ id: ChatIdentity; text: string } | null>;
}

export function createWriteChecks({ deps, guard }: ServiceContext): WriteChecks {
  const { hub, throttle, sessionLive } = deps;

  const writer = (conn: ChatConnection): ChatIdentity | null => {
    // A socket being closed (ban, sign-out, abuse) may still have requests queued behind a slow one: none of
    // them may be stored or broadcast after the close began.
    if (conn.ws.readyState !== conn.ws.OPEN) return null;
    const id = conn.identity;
    if (!id) {
      guard.fail(conn, ChatErrorCode.UNAUTHORIZED, 'Guests are read-only: sign in to take part');
      return null;
    }
    // The session was resolved at connect time; its expiry is known and cheap to enforce here, revocation is
    // re-checked by `sessionLive` before anything is stored or broadcast.
    if (id.sessionExpiresAt <= Date.now()) {
      hub.send(
        conn,
        encode({ type: 'error', code: ChatErrorCode.SESSION_EXPIRED, message: 'Session expired' }),
      );
      hub.close(conn, CloseCode.SESSION_ENDED, 'session expired');
      return null;
    }
    if (!id.emailVerified) {
      guard.fail(conn, ChatErrorCode.EMAIL_NOT_VERIFIED, 'Verify your email address to take part');
      return null;
    }
    return id;
  };

  /** True (after telling the client) when the throttle refused this write. */
  const throttled = (conn: ChatConnection, result: ThrottleResult): boolean => {
    if (result.ok) return false;
    if (!guard.countAbuse(conn)) {
      hub.send(
        conn,
        encode({
          type: 'throttled',
          retryAfterMs: result.retryAfterMs,
          limit: throttle.limit,
          windowMs: throttle.windowMs,
        }),
      );
    }
    return true;
  };

  return {
    writer,
    async writableText(conn, raw) {
      const id = writer(conn);
      if (!id) return null;
      const text = normalizeMessageText(raw, id.isAdmin);
      if (!text.ok) {
        guard.fail(conn, text.code, text.message);
        return null;
      }
      // Both are store round trips and neither depends on the other: issued in the same tick they leave in one
      // pipeline, one round trip instead of two on every send's critical path (under CPU contention each wait for
      // a reply costs a scheduling delay, the bulk of a send's latency). A write refused for its session still
      // counts towards the throttle: its socket is being closed, and the window ends on its own.
      const [live, hit] = await Promise.all([sessionLive(conn, id), throttle.hit(id.userId)]);
      if (!live || throttled(conn, hit)) return null;
      return { id, text: text.text };
    },
  };
}
