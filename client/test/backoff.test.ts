import { describe, expect, it } from 'vitest';
import { Backoff, fullJitterDelay } from '../src/backoff.js';

describe('full-jitter backoff', () => {
  it('draws uniformly below min(cap, base × 2^attempt)', () => {
    const opts = { baseMs: 100, capMs: 1000, random: () => 0.999999 };
    expect(fullJitterDelay(0, opts)).toBe(99);
    expect(fullJitterDelay(1, opts)).toBe(199);
    expect(fullJitterDelay(3, opts)).toBe(799);
    // Capped from attempt 4 on (1600 > 1000), and huge attempts do not overflow.
    expect(fullJitterDelay(4, opts)).toBe(999);
    expect(fullJitterDelay(5000, opts)).toBe(999);
    expect(fullJitterDelay(3, { ...opts, random: () => 0 })).toBe(0);
    expect(fullJitterDelay(2, { ...opts, random: () => 0.5 })).toBe(200);
  });

  it('spreads delays over the whole window (full jitter, not equal jitter)', () => {
    let seed = 42;
    // A small deterministic LCG: the test must not depend on Math.random.
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const delays = Array.from({ length: 2000 }, () =>
      fullJitterDelay(3, { baseMs: 100, capMs: 10_000, random }),
    );
    expect(Math.min(...delays)).toBeLessThan(40);
    expect(Math.max(...delays)).toBeGreaterThan(760);
    expect(delays.every((d) => d >= 0 && d < 800)).toBe(true);
  });

  it('grows per retry and starts over after reset()', () => {
    const b = new Backoff({ baseMs: 10, capMs: 10_000, random: () => 0.5 });
    expect([b.next(), b.next(), b.next(), b.next()]).toEqual([5, 10, 20, 40]);
    expect(b.attempts).toBe(4);
    b.reset();
    expect(b.next()).toBe(5);
  });
});
