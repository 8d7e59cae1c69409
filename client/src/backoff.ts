// Reconnect delays: exponential backoff with FULL jitter (delay = random() × min(cap, base × 2^attempt)), so a fleet
// of clients dropped at once (a restart) spreads its reconnects over the whole window instead of arriving in waves.

export interface BackoffOptions {
  /** Window of the first retry (ms). */
  baseMs: number;
  /** Upper bound of the window (ms). */
  capMs: number;
  /** Uniform [0, 1) source; injectable so tests are deterministic. */
  random: () => number;
}

/** The delay before retry number `attempt` (0-based): uniform in [0, min(cap, base × 2^attempt)). */
export function fullJitterDelay(attempt: number, { baseMs, capMs, random }: BackoffOptions): number {
  // 2^attempt overflows to Infinity for huge attempts, which min() turns back into the cap.
  const window = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(random() * window);
}

/** A retry counter: `next()` gives the delay for the next retry and counts it; `reset()` after a healthy connection. */
export class Backoff {
  private attempt = 0;
  constructor(private readonly options: BackoffOptions) {}

  next(): number {
    const delay = fullJitterDelay(this.attempt, this.options);
    this.attempt++;
    return delay;
  }

  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}
