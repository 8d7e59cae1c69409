// withTimeout (infra/timeout.ts): settles like the promise it wraps, or rejects with its message once the time is up;
// a late settlement changes nothing, and its timer never holds the process open.
import { describe, expect, it } from 'vitest';
import { withTimeout } from '../../src/infra/timeout.js';

describe('withTimeout', () => {
  it('settles like the promise when it settles in time', async () => {
    await expect(withTimeout(Promise.resolve(7), 1_000)).resolves.toBe(7);
    const failure = new Error('store said no');
    await expect(withTimeout(Promise.reject(failure), 1_000)).rejects.toBe(failure);
  });

  it('rejects with its message when the time is up, and a late answer changes nothing', async () => {
    let late: (v: number) => void = () => {};
    const slow = new Promise<number>((r) => (late = r));
    const raced = withTimeout(slow, 20, 'store timeout');
    await expect(raced).rejects.toThrow('store timeout');
    late(1);
    await expect(raced).rejects.toThrow('store timeout');
    // The rejection of a promise that lost the race is handled, not reported as unhandled.
    const lost = withTimeout(
      new Promise<number>((_, reject) => setTimeout(() => reject(new Error('x')), 40)),
      10,
    );
    await expect(lost).rejects.toThrow('timeout');
    await new Promise((r) => setTimeout(r, 60));
  });
});
