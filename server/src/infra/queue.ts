// Owns the mechanics shared by the durable PostgreSQL queues (infra/email-outbox.ts, webhooks/worker.ts): the
// retry delay, the "due and not leased" predicate rows are claimed by, and the poll loop that drains a queue on
// a timer and whenever work is added (docs/architecture.md, "Email" and "Webhooks").
import { type SQL, sql } from 'drizzle-orm';
import type { Logger } from './logger.js';

/**
 * Exponential backoff with full jitter: a uniform delay in [0, min(cap, base · 2^(attempts−1))). After an outage
 * every queued row would otherwise come due at the same instant on every instance and hit the target at once.
 */
export function backoffMs(
  attempts: number,
  baseMs: number,
  capMs: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(baseMs * 2 ** Math.max(0, attempts - 1), capMs);
  return Math.floor(random() * ceiling);
}

/**
 * Rows of a queue table (columns status, next_attempt_at, locked_until) that may be claimed now: pending, due,
 * and not leased by a live worker. A worker that died mid-send leaves a lease that simply expires, so its rows
 * are claimed again by any instance (at-least-once).
 */
export function dueAndUnleased(alias: string): SQL {
  const t = sql.raw(alias);
  return sql`${t}.status = 'pending' and ${t}.next_attempt_at <= now()
    and (${t}.locked_until is null or ${t}.locked_until < now())`;
}

/** `now() + ms` as an SQL interval expression. */
export function inMs(ms: number): SQL {
  return sql`now() + ${`${Math.max(0, Math.round(ms))} milliseconds`}::interval`;
}

export interface QueueLoop {
  /** Starts polling (and runs a round at once). */
  start(): void;
  /** Runs a round now, or right after the one in progress. */
  kick(): void;
  /** Stops polling and waits for the round in progress. */
  stop(): Promise<void>;
  readonly stopped: boolean;
}

/**
 * Runs `round` every `pollMs` and on kick(), never two rounds at once: a kick during a round runs another right
 * after it, so work added meanwhile is not left for the next poll. A failing round is logged, never thrown.
 */
export function createQueueLoop(options: {
  name: string;
  pollMs: number;
  logger: Logger;
  round: () => Promise<void>;
}): QueueLoop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = true;

  const drain = async () => {
    do {
      again = false;
      try {
        await options.round();
      } catch (err) {
        options.logger.warn({ err }, `${options.name} round failed`);
      }
    } while (again && !stopped);
  };

  const kick = () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain().finally(() => {
      running = undefined;
    });
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      kick();
      schedule();
    }, options.pollMs);
    timer.unref();
  };

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      kick();
      schedule();
    },
    kick,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
    get stopped() {
      return stopped;
    },
  };
}
