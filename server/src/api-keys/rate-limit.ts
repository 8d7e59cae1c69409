// Owns the per-key request limit: a fixed window counted in the shared store (INCR + PEXPIRE, so it holds across
// instances), or per instance while the store is unreachable (never without a limit).

import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { withTimeout } from '../infra/timeout.js';

export type LimitResult = { ok: true } | { ok: false; retryAfterMs: number };

export interface KeyRateLimiter {
  hit(keyId: string): Promise<LimitResult>;
  close(): void;
}

export function createKeyRateLimiter(deps: {
  store: Store;
  max: number;
  windowMs: number;
  storeTimeoutMs: number;
  logger: Logger;
}): KeyRateLimiter {
  const { store, max, windowMs, logger } = deps;
  const local = new Map<string, { count: number; resetAt: number }>();
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [k, w] of local) if (w.resetAt <= now) local.delete(k);
  }, windowMs);
  sweep.unref();
  const localHit = (keyId: string, now: number) => {
    let w = local.get(keyId);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + windowMs };
      local.set(keyId, w);
    }
    w.count++;
    return { count: w.count, ttlMs: w.resetAt - now };
  };
  return {
    async hit(keyId) {
      const now = Date.now();
      let counted: { count: number; ttlMs: number };
      if (!store.isReady()) counted = localHit(keyId, now);
      else {
        try {
          counted = await withTimeout(
            store.incrWindow(`apikey:rl:${keyId}`, windowMs),
            deps.storeTimeoutMs,
            'store timeout',
          );
        } catch (err) {
          logger.warn(
            { err: (err as Error).message },
            'api key rate limit: store unreachable, counting locally',
          );
          counted = localHit(keyId, now);
        }
      }
      if (counted.count <= max) return { ok: true };
      return { ok: false, retryAfterMs: counted.ttlMs > 0 ? counted.ttlMs : windowMs };
    },
    close() {
      clearInterval(sweep);
    },
  };
}
