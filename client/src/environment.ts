// What the live connections need to know about the page: network state and visibility. Browsers by default;
// injectable so Node and tests can drive online/offline and visibility changes.

export type EnvironmentEvent = 'online' | 'offline' | 'visible';

export interface ClientEnvironment {
  isOnline(): boolean;
  isVisible(): boolean;
  /** Calls `listener` on each occurrence of `event`; returns the unsubscribe function. */
  on(event: EnvironmentEvent, listener: () => void): () => void;
}

interface BrowserGlobals {
  navigator?: { onLine?: boolean };
  document?: {
    visibilityState?: string;
    addEventListener?(type: string, l: () => void): void;
    removeEventListener?(type: string, l: () => void): void;
  };
  addEventListener?(type: string, l: () => void): void;
  removeEventListener?(type: string, l: () => void): void;
}

/** The page's environment; in Node (no window) it is always online and visible, with no events. */
export function browserEnvironment(): ClientEnvironment {
  const g = globalThis as unknown as BrowserGlobals;
  return {
    isOnline: () => g.navigator?.onLine !== false,
    isVisible: () => g.document?.visibilityState !== 'hidden',
    on(event, listener) {
      if (event === 'visible') {
        const doc = g.document;
        if (!doc?.addEventListener) return () => {};
        const handler = () => {
          if (doc.visibilityState !== 'hidden') listener();
        };
        doc.addEventListener('visibilitychange', handler);
        return () => doc.removeEventListener?.('visibilitychange', handler);
      }
      if (typeof g.addEventListener !== 'function') return () => {};
      g.addEventListener(event, listener);
      return () => g.removeEventListener?.(event, listener);
    },
  };
}

/** Resolves after `ms`, or at once when `signal` aborts or one of the `wakeOn` events fires. */
export function interruptibleSleep(
  ms: number,
  signal: AbortSignal,
  env: ClientEnvironment,
  wakeOn: EnvironmentEvent[],
): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const offs: Array<() => void> = [];
    const done = () => {
      clearTimeout(timer);
      for (const off of offs) off();
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    for (const e of wakeOn) offs.push(env.on(e, done));
  });
}
