// Owed room syncs: a room change whose publish reached this instance only (the bus was degraded, the store
// refused the send during a failover, the message was over the bus bound) leaves the other instances' followers
// behind, and they cannot tell: a live pipe only sees a gap when a later revision arrives, so a room that goes
// quiet would stay behind until its next message or a reconnect. The sender therefore owes the room a `sync`
// carrying the revision it stored, and publishes it until one gets through; receivers read the missing changes
// from PostgreSQL (chat/live/delivery.ts, gap filling). Receivers that were degraded themselves catch up on their
// own recovery; this covers the loss only the sender saw.
import type { Logger } from '../../infra/logger.js';

/** How often owed syncs are retried while they keep failing (a store failover takes seconds). */
export const RESYNC_RETRY_MS = 1_000;

export interface ResyncDeps {
  /** Publishes a `sync` for the room; resolves true once it reached the other instances. */
  publishSync(roomId: string, rev: number): Promise<boolean>;
  isDegraded(): boolean;
  logger: Logger;
  retryMs?: number;
}

export interface Resync {
  /** A change of `roomId` at `rev` reached this instance only. */
  owe(roomId: string, rev: number): void;
  /** Publishes every owed sync now (the bus recovered). */
  flush(): Promise<void>;
  /** Rooms still owed a sync (for tests and metrics). */
  owed(): number;
  stop(): void;
}

export function createResync(deps: ResyncDeps): Resync {
  const retryMs = deps.retryMs ?? RESYNC_RETRY_MS;
  /** Room → the highest revision stored here whose change may not have reached the others. */
  const owed = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  const schedule = () => {
    if (stopped || timer || owed.size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, retryMs);
    timer.unref();
  };

  const run = async () => {
    // While degraded every publish stays local: wait for recovery (which flushes) or the next retry.
    if (deps.isDegraded()) return;
    for (const [roomId, rev] of [...owed]) {
      let sent = false;
      try {
        sent = await deps.publishSync(roomId, rev);
      } catch (err) {
        deps.logger.warn({ err, roomId }, 'chat: publishing a room sync failed');
      }
      // A newer change owed meanwhile keeps its entry.
      if (sent && owed.get(roomId) === rev) owed.delete(roomId);
    }
  };

  const flush = (): Promise<void> => {
    running ??= run().finally(() => {
      running = undefined;
      schedule();
    });
    return running;
  };

  return {
    owe(roomId, rev) {
      if (stopped) return;
      if (rev > (owed.get(roomId) ?? -1)) owed.set(roomId, rev);
      schedule();
    },
    flush,
    owed: () => owed.size,
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      owed.clear();
    },
  };
}
