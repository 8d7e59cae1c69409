// Fan-out write batching for the chat hub: which sockets are corked, when they are flushed (load-adaptive
// coalescing), and the frame/write counts behind /metrics. The hub decides what is written; this decides when.
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';

/**
 * Fan-out frames per second (one frame to one socket counts one) from which the instance counts as loaded and
 * coalesces: 25 msg/s to 667 sockets (16,700/s) stays below it, 50 msg/s (33,000/s) is above. Frames, not writes,
 * so coalescing does not lower its own signal and switch itself off.
 */
export const COALESCE_MIN_FRAMES_PER_SECOND = 25_000;
// The load signal's bucket: frames are counted per bucket, and the busier of the current and the previous one
// decides, so one burst of a few messages does not trip it and the signal follows the load within half a second.
const LOAD_BUCKET_MS = 250;

/** What the batch needs of a connection: its raw socket and whether it is corked now. */
export interface Corkable {
  readonly socket: Duplex;
  corked: boolean;
}

export interface WriteBatchOptions {
  /** Under load, the least time between two flushes (0: flush every event-loop turn). */
  coalesceMs: number;
  /** Load threshold in fan-out frames per second. */
  minFramesPerSecond: number;
  /** Open sockets now: coalescing needs more than one frame per socket per window on average. */
  sockets: () => number;
  /** After each flush: fan-out frames and socket writes since the previous call. */
  onWrites?: (frames: number, writes: number) => void;
  /** After each flush that wrote: how long its writes took (seconds). */
  onFlushSeconds?: (seconds: number) => void;
}

export interface WriteBatch {
  /** Corks the socket until the next flush (no-op when already corked) and schedules that flush. */
  cork(conn: Corkable): void;
  /** Counts one fan-out frame (the load signal and the metrics). */
  countFrame(): void;
  /** Lets a corked socket's writes go now (a direct reply or a close frame must not wait for the flush). */
  uncorkNow(conn: Corkable): void;
  /** Flushes a pending batch at once (shutdown). */
  flushNow(): void;
  stats(): { fanoutFrames: number; socketWrites: number };
}

// Why: a socket written by fan-out stays corked until the next flush, so the frames it gets meanwhile leave in one
// writev instead of one syscall each (one write per socket per message was 56 % of an instance's busy time at
// 100 msg/s to 667 sockets). When the flush runs:
// - idle (under the threshold, or fewer than one frame per socket per window on average): in a setImmediate, i.e. in the same loop iteration; it only merges events that
//   arrive together (a backlog read from the bus in one go) and adds no latency;
// - loaded: no sooner than `coalesceMs` after the previous flush. A message after a quiet spell still leaves in
//   the same iteration; one right behind another waits at most `coalesceMs`, with whatever else arrives
//   meanwhile, so a socket gets at most one fan-out write per `coalesceMs`.
// Order per socket holds: every frame goes through the socket's one stream, in order, corked or not.
export function createWriteBatch(options: WriteBatchOptions): WriteBatch {
  const { coalesceMs } = options;
  const minFramesPerBucket = (options.minFramesPerSecond * LOAD_BUCKET_MS) / 1000;
  const corked: Corkable[] = [];
  let flushScheduled = false;
  let flushTimer: NodeJS.Timeout | null = null;
  let lastFlushAt = Number.NEGATIVE_INFINITY;
  let bucketStart = 0;
  let bucketFrames = 0;
  let previousBucketFrames = 0;
  let fanoutFrames = 0;
  let socketWrites = 0;
  let reportedFrames = 0;
  let reportedWrites = 0;

  const loaded = (now: number): boolean => {
    if (now - bucketStart >= LOAD_BUCKET_MS) {
      // A bucket that ended long ago says nothing about the last moment.
      previousBucketFrames = now - bucketStart < 2 * LOAD_BUCKET_MS ? bucketFrames : 0;
      bucketFrames = 0;
      bucketStart = now;
    }
    const frames = Math.max(previousBucketFrames, bucketFrames);
    // Both: enough writes for their cost to matter, and frames dense enough that a window would hold two to a
    // socket (otherwise a message would wait for the window with nothing to share it with).
    return frames >= minFramesPerBucket && frames >= (options.sockets() * LOAD_BUCKET_MS) / coalesceMs;
  };

  const flush = () => {
    flushScheduled = false;
    flushTimer = null;
    const started = performance.now();
    lastFlushAt = started;
    for (const conn of corked) {
      // Already uncorked by a direct reply (and perhaps corked again, so listed twice): once is enough.
      if (!conn.corked) continue;
      conn.corked = false;
      if (conn.socket.writableLength > 0) socketWrites++;
      conn.socket.uncork();
    }
    const flushed = corked.length;
    corked.length = 0;
    if (flushed > 0) options.onFlushSeconds?.((performance.now() - started) / 1000);
    if (options.onWrites) {
      options.onWrites(fanoutFrames - reportedFrames, socketWrites - reportedWrites);
      reportedFrames = fanoutFrames;
      reportedWrites = socketWrites;
    }
  };

  const scheduleFlush = () => {
    if (flushScheduled) return;
    flushScheduled = true;
    const now = performance.now();
    const wait = coalesceMs > 0 && loaded(now) ? lastFlushAt + coalesceMs - now : 0;
    if (wait >= 1) flushTimer = setTimeout(flush, wait);
    else setImmediate(flush);
  };

  return {
    cork(conn) {
      if (conn.corked) return;
      conn.corked = true;
      conn.socket.cork();
      corked.push(conn);
      scheduleFlush();
    },
    countFrame() {
      bucketFrames++;
      fanoutFrames++;
    },
    uncorkNow(conn) {
      if (!conn.corked) return;
      conn.corked = false;
      socketWrites++;
      conn.socket.uncork();
    },
    flushNow() {
      if (!flushTimer) return;
      clearTimeout(flushTimer);
      flush();
    },
    stats: () => ({ fanoutFrames, socketWrites }),
  };
}
