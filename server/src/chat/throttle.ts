// Owns chat rate limits: the per-user message throttle (atomic windowed counter in the shared store, so it
// holds across connections and instances; a per-instance in-memory window while the store is down or the bus is
// degraded) and the per-user typing throttle (per instance: typing is ephemeral and cheap to over-deliver).

import { createWindowLimiter, type LimitResult, type WindowLimiter } from '../http/rate-limit.js';
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { ChatLimits } from './protocol.js';

export type ThrottleResult = LimitResult;

/** A per-user window limit: http/rate-limit.ts's limiter, with its figures for the error frame. */
export interface MessageThrottle extends WindowLimiter {
  readonly limit: number;
  readonly windowMs: number;
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

/** The one window limiter (http/rate-limit.ts), counting per instance while the bus is degraded too. */
export function createMessageThrottle(deps: ThrottleDeps): MessageThrottle {
  const limiter = createWindowLimiter({
    store: deps.store,
    prefix: deps.keyPrefix ?? 'chat:throttle:',
    max: deps.limit,
    windowMs: deps.windowMs,
    storeTimeoutMs: deps.storeTimeoutMs ?? 1_000,
    logger: deps.logger,
    countLocally: deps.isDegraded,
    // On the send path: the count goes out at once, not at the end of a turn busy with other messages' fan-out.
    now: true,
  });
  return { limit: deps.limit, windowMs: deps.windowMs, hit: limiter.hit, close: limiter.close };
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
