// Owns chat rate limits: the per-user message throttle (atomic windowed counter in the shared store, so it
// holds across connections and instances; a per-instance in-memory window while the store is down or the bus is
// degraded) and the per-user typing throttle (per instance: typing is ephemeral and cheap to over-deliver).

import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { withTimeout } from '../infra/timeout.js';
import { ChatLimits } from './protocol.js';

export type ThrottleResult = { ok: true } | { ok: false; retryAfterMs: number };

export interface MessageThrottle {
  readonly limit: number;
  readonly windowMs: number;
  hit(userId: string): Promise<ThrottleResult>;
  close(): void;
}

export interface ThrottleDeps {
  store: Store;
  isDegraded: () => boolean;
  limit: number;
  windowMs: number;
  logger: Logger;
  /** Upper bound on a store round trip before the local fallback answers instead. */
  storeTimeoutMs?: number;
  /** Store key prefix of the counters (default `chat:throttle:`); the same limiter counts room creations. */
  keyPrefix?: string;
}

export function createMessageThrottle(deps: ThrottleDeps): MessageThrottle {
  const { store, limit, windowMs, logger } = deps;
  const timeoutMs = deps.storeTimeoutMs ?? 1_000;
  // Once a user is over the limit this instance answers locally until the window ends: a client hammering
  // send_message then costs no store round trips.
  const blockedUntil = new Map<string, number>();
  const local = new Map<string, { count: number; resetAt: number }>();
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [k, until] of blockedUntil) if (until <= now) blockedUntil.delete(k);
    for (const [k, w] of local) if (w.resetAt <= now) local.delete(k);
  }, windowMs);
  sweep.unref();

  const localHit = (userId: string, now: number): { count: number; ttlMs: number } => {
    let w = local.get(userId);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + windowMs };
      local.set(userId, w);
    }
    w.count++;
    return { count: w.count, ttlMs: w.resetAt - now };
  };

  return {
    limit,
    windowMs,
    async hit(userId) {
      const now = Date.now();
      const until = blockedUntil.get(userId);
      if (until !== undefined && until > now) return { ok: false, retryAfterMs: until - now };
      let result: { count: number; ttlMs: number };
      if (deps.isDegraded() || !store.isReady()) {
        result = localHit(userId, now);
      } else {
        try {
          result = await withTimeout(
            store.incrWindow(`${deps.keyPrefix ?? 'chat:throttle:'}${userId}`, windowMs),
            timeoutMs,
            'store timeout',
          );
        } catch (err) {
          logger.warn({ err: (err as Error).message }, 'chat throttle: store unavailable, using local limit');
          result = localHit(userId, now);
        }
      }
      if (result.count <= limit) return { ok: true };
      const retryAfterMs = Math.max(1, result.ttlMs);
      blockedUntil.set(userId, Date.now() + retryAfterMs);
      return { ok: false, retryAfterMs };
    },
    close() {
      clearInterval(sweep);
      blockedUntil.clear();
      local.clear();
    },
  };
}

export interface TypingThrottle {
  /** True when this typing event should be forwarded. */
  allow(userId: string, isTyping: boolean): boolean;
  forget(userId: string): void;
}

/**
 * `isTyping: true` passes at most once per TYPING_INTERVAL_MS per user; `false` passes only right after a
 * forwarded `true`. So a user produces at most two typing events per interval, however many tabs they flood from.
 */
export function createTypingThrottle(intervalMs: number = ChatLimits.TYPING_INTERVAL_MS): TypingThrottle {
  const state = new Map<string, { lastTrueAt: number; typing: boolean }>();
  return {
    allow(userId, isTyping) {
      const now = Date.now();
      const s = state.get(userId);
      if (isTyping) {
        if (s && now - s.lastTrueAt < intervalMs) return false;
        state.set(userId, { lastTrueAt: now, typing: true });
        return true;
      }
      if (!s?.typing) return false;
      s.typing = false;
      return true;
    },
    forget(userId) {
      state.delete(userId);
      // Rooms other than general are keyed `<userId>:<roomId>`.
      const prefix = `${userId}:`;
      for (const key of state.keys()) if (key.startsWith(prefix)) state.delete(key);
    },
  };
}
