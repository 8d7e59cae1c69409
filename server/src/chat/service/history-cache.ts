// The per-instance cache of the history sent on connect (the newest messages of `general` with the head they
// reflect), so a reconnect storm costs one query instead of one per socket.
import { ChatLimits, type RoomMessage } from '../protocol.js';
import type { ChatRepository, RoomHead } from '../repository.js';

export interface GeneralSnapshot {
  messages: RoomMessage[];
  /** The room's head the snapshot reflects: live frames continue from its revision. */
  head: RoomHead;
}

export interface HistoryCache {
  /** The newest messages of `general` with the head they reflect. */
  get(): Promise<GeneralSnapshot>;
  /** Called for every change of `general`. */
  invalidate(): void;
}

export function createHistoryCache(repo: ChatRepository, ttlMs: number): HistoryCache {
  let generation = 0;
  let entry: { generation: number; at: number; promise: Promise<GeneralSnapshot> } | undefined;
  return {
    get() {
      const now = Date.now();
      // The TTL bounds staleness when this instance missed bus events (degraded mode); a stale snapshot costs
      // the new socket a catch-up read, never a missed message (live/resume.ts goLive).
      if (entry && entry.generation === generation && now - entry.at < ttlMs) return entry.promise;
      const promise = repo.recentWithHead(ChatLimits.HISTORY_ON_CONNECT);
      const current = { generation, at: now, promise };
      entry = current;
      promise.catch(() => {
        if (entry === current) entry = undefined;
      });
      return promise;
    },
    invalidate() {
      generation++;
    },
  };
}
