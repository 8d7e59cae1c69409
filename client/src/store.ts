// A minimal observable value: what useSyncExternalStore needs (stable snapshots, replaced on change).

export type Listener<T> = (value: T) => void;

export class Store<T> {
  private readonly listeners = new Set<Listener<T>>();
  constructor(private value: T) {}

  get = (): T => this.value;

  set(next: T): void {
    if (Object.is(next, this.value)) return;
    this.value = next;
    for (const l of [...this.listeners]) l(next);
  }

  /** Merges `patch`; a patch that changes nothing keeps the snapshot (no re-render). */
  update(patch: Partial<T>): void {
    const current = this.value as Record<string, unknown>;
    const changed = Object.entries(patch).some(([k, v]) => !Object.is(current[k], v));
    if (changed) this.set({ ...this.value, ...patch });
  }

  subscribe = (listener: Listener<T>): (() => void) => {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  };
}

/** A set of listeners called with one argument; errors in one listener do not stop the others. */
export class Emitter<E> {
  private readonly listeners = new Set<(e: E) => void>();
  on(listener: (e: E) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }
  emit(e: E): void {
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch (err) {
        // A failing toast handler must not break the feed; report it where a developer looks.
        console.error(err);
      }
    }
  }
}

/**
 * Reference-counted holds on a connection (the React hooks' mounts): `take()` counts one, and its release counts
 * back once however often it is called, then runs `onRelease` so the owner can close when nobody holds it.
 */
export class Holds {
  count = 0;
  constructor(private readonly onRelease: () => void) {}

  take(): () => void {
    this.count++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.count = Math.max(0, this.count - 1);
      this.onRelease();
    };
  }
}
