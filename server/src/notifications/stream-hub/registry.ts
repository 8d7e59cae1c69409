// Owns this instance's open SSE streams by user and by client address: who may open one more (caps and the
// rate of opens, checked before anything is opened), registration with presence, and clean removal when a
// stream ends for any reason. docs/architecture.md, "Limits and timeouts".
import { createLocalWindows } from '../../http/rate-limit.js';
import type { Presence } from '../../realtime/index.js';
import { StreamErrorCode } from '../errors.js';
import type { StreamEntry } from './order.js';

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

/** Fixed-window counters of stream opens per key (http/rate-limit.ts's local windows: opens count per instance). */
function createOpenCounter(limit: number, windowMs: number) {
  const windows = createLocalWindows(windowMs);
  return {
    /** Counts one open; returns the seconds to wait when over the limit. */
    hit(key: string, now: number): number | null {
      const { count, ttlMs } = windows.hit(key, windowMs, now);
      return count > limit ? Math.max(1, Math.ceil(ttlMs / 1000)) : null;
    },
  };
}

export function createStreamRegistry(limits: StreamLimits, presence: Presence) {
  const users = new Map<string, Set<StreamEntry>>();
  const perIp = new Map<string, number>();
  const opens = createOpenCounter(limits.opensPerWindow, limits.openWindowMs);
  let streamCount = 0;

  return {
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
      if ((users.get(userId)?.size ?? 0) >= limits.perUser || (perIp.get(ip) ?? 0) >= limits.perIp) {
        return {
          code: StreamErrorCode.TOO_MANY_STREAMS,
          message: 'Too many open notification streams; close one (one per browser is enough)',
          retryAfterS: 5,
        };
      }
      return null;
    },

    /** Registers an opened stream (and its user with presence); it is removed when its connection closes. */
    add(entry: StreamEntry): void {
      const { userId, ip } = entry;
      let set = users.get(userId);
      if (!set) {
        set = new Set();
        users.set(userId, set);
      }
      set.add(entry);
      streamCount++;
      perIp.set(ip, (perIp.get(ip) ?? 0) + 1);
      const release = presence.userConnected(userId);
      entry.conn.onClose(() => {
        streamCount--;
        const left = (perIp.get(ip) ?? 1) - 1;
        if (left > 0) perIp.set(ip, left);
        else perIp.delete(ip);
        release();
        const s = users.get(userId);
        s?.delete(entry);
        if (s && s.size === 0) users.delete(userId);
      });
    },

    /** This user's open streams on this instance (undefined: none). */
    of: (userId: string): Set<StreamEntry> | undefined => users.get(userId),
    has: (userId: string): boolean => users.has(userId),
    /** Users with a stream here, as a copy (safe while streams close). */
    userIds: (): string[] => [...users.keys()],
    /** Every user's streams (live view: iterate a copy where streams may close meanwhile). */
    byUser: () => users.values(),
    stats: () => ({ streams: streamCount, users: users.size }),
  };
}

export type StreamRegistry = ReturnType<typeof createStreamRegistry>;
