// The one fixed-window counter (http/rate-limit.ts): its per-instance windows, and the store-backed limiter
// falling back to them while the store cannot count.

import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createLocalWindows, createWindowLimiter } from '../../src/http/rate-limit.js';

const logger = pino({ level: 'silent' });

describe('local windows', () => {
  it('counts hits per key within a window and starts a new window once it has ended', () => {
    const windows = createLocalWindows();
    const t0 = 1_000_000;
    expect(windows.hit('a', 1_000, t0)).toEqual({ count: 1, ttlMs: 1_000 });
    expect(windows.hit('a', 1_000, t0 + 400)).toEqual({ count: 2, ttlMs: 600 });
    expect(windows.hit('b', 1_000, t0 + 400)).toEqual({ count: 1, ttlMs: 1_000 });
    expect(windows.hit('a', 1_000, t0 + 1_000)).toEqual({ count: 1, ttlMs: 1_000 });
  });

  it('keeps counting a running window across a sweep, and drops only ended ones', () => {
    const windows = createLocalWindows(100);
    const t0 = Date.now();
    windows.hit('long', 10_000, t0);
    windows.hit('short', 50, t0);
    // Past the sweep interval: the ended window is gone (a new one starts at 1), the running one continues.
    expect(windows.hit('long', 10_000, t0 + 200).count).toBe(2);
    expect(windows.hit('short', 50, t0 + 200).count).toBe(1);
  });

  it('clear() forgets every window', () => {
    const windows = createLocalWindows();
    windows.hit('a', 1_000);
    windows.hit('a', 1_000);
    windows.clear();
    expect(windows.hit('a', 1_000).count).toBe(1);
  });
});

describe('window limiter without a store', () => {
  it('still limits, per instance, while the store is not ready (never unlimited, never an error)', async () => {
    let incrCalls = 0;
    const limiter = createWindowLimiter({
      store: {
        isReady: () => false,
        incrWindow: async () => {
          incrCalls++;
          return { count: 1, ttlMs: 1_000 };
        },
      },
      prefix: 'test:rl:',
      max: 3,
      windowMs: 60_000,
      storeTimeoutMs: 100,
      logger,
    });
    try {
      const results = [];
      for (let i = 0; i < 5; i++) results.push(await limiter.hit('user-1'));
      expect(results.map((r) => r.ok)).toEqual([true, true, true, false, false]);
      const refused = results[3];
      expect(refused && !refused.ok && refused.retryAfterMs).toBeGreaterThan(59_000);
      // Another key has its own window.
      expect((await limiter.hit('user-2')).ok).toBe(true);
      expect(incrCalls).toBe(0);
    } finally {
      limiter.close();
    }
  });

  it('counts locally when the store throws, with the same limit', async () => {
    const limiter = createWindowLimiter({
      store: {
        isReady: () => true,
        incrWindow: async () => {
          throw new Error('connection refused');
        },
      },
      prefix: 'test:rl:',
      max: 2,
      windowMs: 60_000,
      storeTimeoutMs: 100,
      logger,
    });
    try {
      const oks = [];
      for (let i = 0; i < 3; i++) oks.push((await limiter.hit('k')).ok);
      expect(oks).toEqual([true, true, false]);
    } finally {
      limiter.close();
    }
  });
});
