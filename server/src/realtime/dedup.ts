// Owns duplicate suppression for received bus messages: ids seen within the window are dropped. Keyed by
// message id (not by entity), so two legitimate updates of one entity both pass. Memory is bounded.
export interface Dedup {
  /** True when the id was already seen within the window; records it otherwise. */
  seen(id: string, now?: number): boolean;
  size(): number;
}

export function createDedup(windowMs: number, maxEntries = 200_000): Dedup {
  // Insertion order equals arrival order, so the oldest entries are always at the front of the Map.
  const entries = new Map<string, number>();
  const evict = (now: number) => {
    for (const [id, expiresAt] of entries) {
      if (expiresAt > now && entries.size <= maxEntries) break;
      entries.delete(id);
    }
  };
  return {
    seen(id, now = Date.now()) {
      if (windowMs <= 0) return false;
      evict(now);
      const expiresAt = entries.get(id);
      if (expiresAt !== undefined && expiresAt > now) return true;
      entries.set(id, now + windowMs);
      return false;
    },
    size: () => entries.size,
  };
}
