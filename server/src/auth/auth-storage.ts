// Owns better-auth's secondary storage on Herald's store: sessions and verification values under the auth prefix,
// reads that degrade to PostgreSQL (both are stored there too), writes whose failure is repaired durably
// (auth/revocation.ts) instead of failing the request, and the auth rate-limit counters, counted per instance
// while the store cannot count.
import type { BetterAuthOptions } from 'better-auth';

type SecondaryStorage = NonNullable<BetterAuthOptions['secondaryStorage']>;

import { createLocalWindows } from '../http/rate-limit.js';
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { AUTH_STORE_PREFIX, type Revocation } from './revocation.js';

/**
 * The user a better-auth store key belongs to, when it can be told (session records carry it in their value).
 * Used so that a lost write also bumps that user's revocation marker once it is repaired.
 */
function userOfKey(key: string, value?: string): string | null {
  for (const prefix of ['active-sessions-', 'revoked-sessions-before-']) {
    if (key.startsWith(prefix)) return key.slice(prefix.length) || null;
  }
  if (value === undefined) return null;
  try {
    const parsed = JSON.parse(value) as { session?: { userId?: unknown } };
    return typeof parsed?.session?.userId === 'string' ? parsed.session.userId : null;
  } catch {
    return null;
  }
}

export function createAuthStorage(deps: {
  store: Store;
  logger: Logger;
  revocation: Revocation;
}): SecondaryStorage {
  const { store, logger, revocation } = deps;
  const authPrefix = AUTH_STORE_PREFIX;
  // Per-instance windows: the auth rate limit while the shared store cannot count.
  const localWindows = createLocalWindows();
  /**
   * A store write that failed is not the end of the request: the database holds the truth (sessions and
   * verification values are stored there too), and the stale or missing store copy is repaired durably
   * (auth/revocation.ts). Only when the repair cannot be recorded either does the write fail, and the bridge
   * answers 503 rather than a success that did not happen.
   */
  const writeOrRepair = async (key: string, write: () => Promise<void>, value?: string) => {
    try {
      await write();
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'auth store write failed; recording a repair');
      // better-auth's per-user "revoked before" marker is only ever raised; deleting it would forget a
      // revocation, so its repair only bumps Herald's marker (the session records themselves are repaired).
      const repairKey = key.startsWith('revoked-sessions-before-') ? null : authPrefix + key;
      try {
        await revocation.writeFailed(repairKey, userOfKey(key, value));
      } catch {
        throw err;
      }
    }
  };
  return {
    // A failed read degrades to "not in the store": sessions and verification values then come from PostgreSQL
    // (both are stored there too). Failed writes and deletes are repaired durably (writeOrRepair).
    get: async (key) => {
      try {
        return await store.get(authPrefix + key);
      } catch (err) {
        revocation.storeFailed();
        logger.warn({ err: (err as Error).message }, 'auth store read failed');
        return null;
      }
    },
    getAndDelete: (key) => store.getdel(authPrefix + key),
    set: (key, value, ttl) =>
      writeOrRepair(key, () => store.set(authPrefix + key, value, ttl ? ttl * 1000 : undefined), value),
    delete: (key) => writeOrRepair(key, () => store.del(authPrefix + key)),
    increment: async (key, ttl) => {
      try {
        return (await store.incrWindow(authPrefix + key, ttl * 1000)).count;
      } catch (err) {
        // Keys are `<ip>|<path>`. While the store cannot count, each instance counts on its own with the same
        // limit (docs/architecture.md "Limits and timeouts": still limited, never unlimited and never a blanket 503); once the store answers
        // again the shared count takes over.
        logger.warn(
          { err: (err as Error).message },
          'auth rate-limit store unreachable; limiting per instance',
        );
        return localWindows.hit(key, ttl * 1000).count;
      }
    },
  };
}
