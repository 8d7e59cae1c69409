// A Map with a size bound and insertion-order eviction: for caches whose keys are random and never reused
// (session tokens, signed cookie values, ids), where an entry cannot go stale and only memory must be bounded.
export class BoundedMap<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly max: number) {}
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
      const oldest = this.map.keys().next().value;
      if (oldest !== undefined) this.map.delete(oldest);
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
