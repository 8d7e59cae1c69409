// Owns the fixed-window counters of every per-key limit Herald applies itself (API keys, per-client
// per-second limits, chat messages and room creations; better-auth's limits count through the same store
// primitive, `incrWindow`, and the same local windows while the store cannot; SSE stream opens count in local
// windows alone): INCR + PEXPIRE in the shared store, so a limit holds across instances, or per instance while
// the store is unreachable (never without a limit). Once a key is over its limit this instance answers locally
// until the window ends, so a client hammering past its limit costs no further store round trips.
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { withTimeout } from '../infra/timeout.js';

export type LimitResult = { ok: true } | { ok: false; retryAfterMs: number };

export interface WindowLimiter {
  hit(key: string): Promise<LimitResult>;
  close(): void;
}

/**
 * Per-instance fixed windows: the count of each key in its current window. The one in-memory counter behind every
 * limit that counts on one instance (a store-backed limit while the store cannot count, better-auth's limits in the
 * same case, stream opens). Windows that ended are dropped as later hits pass, so there is no timer to stop.
 */
export interface LocalWindows {
  /** Counts one hit of `key`; a new window of `windowMs` starts when none is running. */
  hit(key: string, windowMs: number, now?: number): { count: number; ttlMs: number };
  clear(): void;
}

export function createLocalWindows(sweepEveryMs = 60_000): LocalWindows {
  const windows = new Map<string, { count: number; resetAt: number }>();
  let sweptAt = Date.now();
  return {
    hit(key, windowMs, now = Date.now()) {
      if (now - sweptAt >= sweepEveryMs) {
        for (const [k, w] of windows) if (w.resetAt <= now) windows.delete(k);
        sweptAt = now;
      }
      let w = windows.get(key);
      if (!w || w.resetAt <= now) {
        w = { count: 0, resetAt: now + windowMs };
        windows.set(key, w);
      }
      w.count++;
      return { count: w.count, ttlMs: w.resetAt - now };
    },
    clear: () => windows.clear(),
  };
}

export function createWindowLimiter(deps: {
  store: Pick<Store, 'isReady' | 'incrWindow'>;
  /** Store key prefix, one per limit (`apikey:rl:`, `client:rl:user:`, …). */
  prefix: string;
  max: number;
  windowMs: number;
  storeTimeoutMs: number;
  logger: Logger;
  /** Count locally even while the store answers (chat: while the bus is degraded the store is not trusted). */
  countLocally?: () => boolean;
  /**
   * Send each count to the store at once (`incrWindow`'s `now`) instead of with the turn's other windows: for a
   * latency-critical path. The chat throttle's p99 rose by 5–7 ms while its count waited for the end of a turn
   * that also fanned out other messages (docs/performance.md, "Per-client limits").
   */
  now?: boolean;
}): WindowLimiter {
  const { store, max, windowMs, logger, prefix } = deps;
  const local = createLocalWindows(Math.max(windowMs, 1_000));
  const blockedUntil = new Map<string, number>();
  let lastStoreWarning = 0;
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [k, until] of blockedUntil) if (until <= now) blockedUntil.delete(k);
    },
    Math.max(windowMs, 1_000),
  );
  sweep.unref();
  const localHit = (key: string, now: number) => local.hit(key, windowMs, now);
  return {
    async hit(key) {
      const now = Date.now();
      const until = blockedUntil.get(key);
      if (until !== undefined && until > now) return { ok: false, retryAfterMs: until - now };
      let counted: { count: number; ttlMs: number };
      if (!store.isReady() || deps.countLocally?.()) counted = localHit(key, now);
      else {
        try {
          counted = await withTimeout(
            store.incrWindow(prefix + key, windowMs, deps.now),
            deps.storeTimeoutMs,
            'store timeout',
          );
        } catch (err) {
          // One warning per second at most: this runs per request, and an outage must not flood the log.
          if (now - lastStoreWarning >= 1_000) {
            lastStoreWarning = now;
            logger.warn(
              { err: (err as Error).message, limit: prefix },
              'rate limit: store unreachable, counting locally',
            );
          }
          counted = localHit(key, now);
        }
      }
      if (counted.count <= max) return { ok: true };
      const retryAfterMs = counted.ttlMs > 0 ? counted.ttlMs : windowMs;
      blockedUntil.set(key, now + retryAfterMs);
      return { ok: false, retryAfterMs };
    },
    close() {
      clearInterval(sweep);
      local.clear();
      blockedUntil.clear();
    },
  };
}
