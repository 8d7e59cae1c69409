// A Map with a size bound and insertion-order eviction: for caches whose keys are random and never reused
// (session tokens, signed cookie values, ids), where an entry cannot go stale and only memory must be bounded; or,
// with `onEvict`, for an owner that must know what was dropped (notifications/unread-cache.ts's per-user entries).
// `set` moves a key to the newest place, so what goes first is what was written longest ago.
export class BoundedMap<V> {
  private readonly map = new Map<string, V>();
  /** `onEvict` hears of each entry the bound drops (not of `delete` or `clear`). */
  constructor(
    private readonly max: number,
    private readonly onEvict?: (key: string, value: V) => void,
  ) {}
  get size(): number {
    return this.map.size;
  }
  get(key: string): V | undefined {
    return this.map.get(key);
  }
  has(key: string): boolean {
    return this.map.has(key);
  }
  set(key: string, value: V): void {
    this.map.delete(key);
    if (this.map.size >= this.max) {
      const oldest = this.map.entries().next().value;
      if (oldest !== undefined) {
        this.map.delete(oldest[0]);
        this.onEvict?.(oldest[0], oldest[1]);
      }
    }
    this.map.set(key, value);
  }
  delete(key: string): void {
    this.map.delete(key);
  }
  clear(): void {
    this.map.clear();
  }
}
