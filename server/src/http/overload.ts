// Owns overload protection: a monitor samples the event-loop delay, event-loop utilisation and heap use every
// OVERLOAD_SAMPLE_INTERVAL_MS, and reads the database pool's wait queue on every request; while a threshold is
// exceeded every request (except GET /health and /metrics) is refused at once with 503 UNAVAILABLE and
// Retry-After. Under more load than the process can serve, a fast refusal
// lets clients and load balancers go elsewhere; queueing would make every request slow until all of them time out.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../infra/logger.js';
import { httpError } from './errors.js';

export interface OverloadOptions {
  /** Mean event-loop delay (ms, beyond the timer resolution) over a sample interval; 0 = not checked. */
  maxEventLoopDelayMs: number;
  /** Event-loop utilisation over a sample interval, 0–1; 0 = not checked. */
  maxEventLoopUtilization: number;
  /** V8 heap in use (bytes); 0 = not checked. */
  maxHeapUsedBytes: number;
  /** Queries waiting for a database pool connection; 0 = not checked. */
  maxDbWaiting: number;
  /** Reads that queue's length now. */
  dbWaiting: () => number;
  sampleIntervalMs: number;
  logger: Logger;
}

export interface OverloadSample {
  eventLoopDelayMs: number;
  eventLoopUtilization: number;
  heapUsedBytes: number;
  /** The first threshold exceeded, or null. */
  reason: OverloadReason | null;
}

export type OverloadReason = 'event_loop_delay' | 'event_loop_utilization' | 'heap' | 'database_queue';

export interface OverloadMonitor {
  /** A sampled threshold is exceeded, or the database queue is too long right now (the per-request guard). */
  isOverloaded(): boolean;
  /**
   * The instance as a whole is overloaded: a sampled threshold is exceeded, or the database queue was too long at
   * SUSTAINED_SAMPLES samples in a row. What /health reports: a queue that one burst fills for an instant (and
   * the per-client limits drain) must not make a load balancer pull the instance.
   */
  instanceOverloaded(): boolean;
  /** The figures of the last sample. */
  last(): OverloadSample;
  /** Requests refused since start. */
  refused(): number;
  /** Takes a sample now (the timer does this every interval). */
  sample(): OverloadSample;
  /** Forgets what was measured so far (called once the app is ready: start-up work is not load). */
  rebase(): void;
  close(): void;
}

const RESOLUTION_MS = 10;
/** Consecutive samples over an event-loop threshold before requests are refused. */
export const SUSTAINED_SAMPLES = 2;

export function createOverloadMonitor(opts: OverloadOptions): OverloadMonitor & { countRefusal(): void } {
  const enabled =
    opts.maxEventLoopDelayMs > 0 || opts.maxEventLoopUtilization > 0 || opts.maxHeapUsedBytes > 0;
  let histogram: ReturnType<typeof monitorEventLoopDelay> | undefined;
  if (opts.maxEventLoopDelayMs > 0) {
    histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    histogram.enable();
  }
  let elu = performance.eventLoopUtilization();
  let overloaded = false;
  let loopStreak = 0;
  let dbStreak = 0;
  let refusals = 0;
  let last: OverloadSample = { eventLoopDelayMs: 0, eventLoopUtilization: 0, heapUsedBytes: 0, reason: null };

  // The pool queue moves within milliseconds, so the guard reads it per request; health reads it sampled.
  const dbQueueFull = opts.maxDbWaiting > 0 ? () => opts.dbWaiting() > opts.maxDbWaiting : () => false;

  const sample = (): OverloadSample => {
    // The histogram's timer fires every RESOLUTION_MS; what it measures beyond that is the loop's delay.
    const delayMs = histogram && histogram.count > 0 ? Math.max(0, histogram.mean / 1e6 - RESOLUTION_MS) : 0;
    histogram?.reset();
    const now = performance.eventLoopUtilization();
    const utilization = performance.eventLoopUtilization(now, elu).utilization;
    elu = now;
    const heapUsed = opts.maxHeapUsedBytes > 0 ? process.memoryUsage().heapUsed : 0;
    const loopReason =
      opts.maxEventLoopDelayMs > 0 && delayMs > opts.maxEventLoopDelayMs
        ? 'event_loop_delay'
        : opts.maxEventLoopUtilization > 0 && utilization > opts.maxEventLoopUtilization
          ? 'event_loop_utilization'
          : null;
    // One long synchronous stretch (PGlite's migrations or queries in the embedded default, a password hash on a
    // starved machine) makes one interval's mean delay huge; refusing every request for it would turn a blip into
    // an outage. The loop figures count only when they hold for SUSTAINED_SAMPLES intervals in a row.
    loopStreak = loopReason ? loopStreak + 1 : 0;
    dbStreak = dbQueueFull() ? dbStreak + 1 : 0;
    const reason =
      loopReason && loopStreak >= SUSTAINED_SAMPLES
        ? loopReason
        : opts.maxHeapUsedBytes > 0 && heapUsed > opts.maxHeapUsedBytes
          ? 'heap'
          : null;
    last = { eventLoopDelayMs: delayMs, eventLoopUtilization: utilization, heapUsedBytes: heapUsed, reason };
    const next = reason !== null;
    if (next !== overloaded) {
      overloaded = next;
      if (next) {
        opts.logger.warn(
          { reason, eventLoopDelayMs: Math.round(delayMs), eventLoopUtilization: utilization, heapUsed },
          'overloaded: refusing requests with 503 until the load drops',
        );
      } else {
        opts.logger.warn({ refused: refusals }, 'load back under the thresholds: serving again');
      }
    }
    return last;
  };

  const timer = enabled || opts.maxDbWaiting > 0 ? setInterval(sample, opts.sampleIntervalMs) : undefined;
  timer?.unref();

  return {
    isOverloaded: () => overloaded || dbQueueFull(),
    instanceOverloaded: () => overloaded || dbStreak >= SUSTAINED_SAMPLES,
    last: () => last,
    refused: () => refusals,
    countRefusal() {
      refusals++;
    },
    sample,
    rebase() {
      histogram?.reset();
      elu = performance.eventLoopUtilization();
      loopStreak = 0;
      dbStreak = 0;
    },
    close() {
      if (timer) clearInterval(timer);
      histogram?.disable();
    },
  };
}

/** Routes that must stay answerable under overload: health reports it, metrics show it. */
const EXEMPT = new Set(['/health', '/metrics']);

/** The first onRequest hook: refuses before any other work (session lookup, parsing, logging) is spent. */
export function installOverloadGuard(
  app: FastifyInstance,
  monitor: OverloadMonitor & { countRefusal(): void },
  retryAfterS: number,
): void {
  const headers = { 'retry-after': String(retryAfterS) };
  // A callback hook: the common case (not overloaded) costs no promise and no microtask.
  app.addHook('onRequest', (request, _reply, done) => {
    if (!monitor.isOverloaded()) return done();
    const q = request.url.indexOf('?');
    if (EXEMPT.has(q < 0 ? request.url : request.url.slice(0, q))) return done();
    monitor.countRefusal();
    done(httpError('UNAVAILABLE', 'The server is overloaded; retry shortly', { headers }));
  });
}
